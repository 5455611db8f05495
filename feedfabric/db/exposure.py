"""Engagement read as a rate of exposure: author_affinity per post of that author served to the member
(author_exposure), topic_interest per post of that tag served (topic_exposure); migration 273.

The feed log's insert counts what it logs into the exposure tables and logs both rates as of serving;
For You's candidates statement reads them the same way, through these fragments, so a learned weight
means the same thing in training and in ranking.
"""

from __future__ import annotations


def affinity_rate(affinity: str, exposure: str) -> str:
    """`affinity` (author_affinity row) and `exposure` (author_exposure row) are left-joined aliases."""
    return f"COALESCE({affinity}.score, 0) / (1 + COALESCE({exposure}.served, 0))"


def topic_signals(member: str, post: str, alias: str) -> str:
    """A LEFT JOIN LATERAL giving `alias`.interest (the best topic_interest among the post's tags) and
    `alias`.interest_rate (the best rate among them), NULL without one; `member` and `post` are SQL
    expressions. One read of the post's tags for both, none for a member without topic interest."""
    return f"""LEFT JOIN LATERAL (
               SELECT max(ti.score) AS interest, max(ti.score / (1 + COALESCE(te.served, 0))) AS interest_rate
               FROM post_tags pt
               JOIN topic_interest ti ON ti.tag = pt.tag AND ti.member_id = {member}
               LEFT JOIN topic_exposure te ON te.member_id = {member} AND te.tag = pt.tag
               WHERE pt.post_id = {post}
                 AND EXISTS (SELECT 1 FROM topic_interest mine WHERE mine.member_id = {member})) {alias} ON true"""


def count_served(served: str) -> str:
    """Data-modifying CTEs adding a statement's served rows (`served`: a CTE of member_id, post_id) to
    the exposure counts; the statement's own reads still see the counts from before it. A post the
    member already liked or commented on is not counted: it cannot be engaged with again (Following
    pages serve it again and again), so counting it would lower the rate of the authors and tags the
    member likes most."""
    return f"""engageable AS (
               SELECT e.member_id, e.post_id FROM {served} e
               WHERE NOT EXISTS (SELECT 1 FROM likes l WHERE l.post_id = e.post_id AND l.member_id = e.member_id)
                 AND NOT EXISTS (SELECT 1 FROM comments c WHERE c.author_id = e.member_id AND c.post_id = e.post_id)
           ), counted_authors AS (
               INSERT INTO author_exposure (member_id, author_id, served)
               SELECT e.member_id, p.author_id, count(*) FROM engageable e JOIN posts p ON p.id = e.post_id
               GROUP BY 1, 2 ORDER BY 1, 2
               ON CONFLICT (member_id, author_id) DO UPDATE SET served = author_exposure.served + EXCLUDED.served
           ), counted_tags AS (
               INSERT INTO topic_exposure (member_id, tag, served)
               SELECT e.member_id, pt.tag, count(*) FROM engageable e JOIN post_tags pt ON pt.post_id = e.post_id
               GROUP BY 1, 2 ORDER BY 1, 2
               ON CONFLICT (member_id, tag) DO UPDATE SET served = topic_exposure.served + EXCLUDED.served
           )"""
