"""Engagement read as a rate of exposure: author_affinity per post of that author served to the member
(author_exposure), topic_interest per post of that tag served (topic_exposure); migration 273.

The feed log's writer counts what it logs into the exposure tables (db.feed_log.fold_exposure) and
logs both rates as of serving, computed the same way in Python (feeds.served_signals); For You's
candidates statement reads them through these fragments, so a learned weight means the same thing in
training and in ranking.
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
