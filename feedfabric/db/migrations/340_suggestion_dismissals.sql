-- dismissSuggestion: a member a viewer dismissed stays out of their suggestedMembers for 30 days
-- (feeds.suggestions.DISMISS_FOR). One row per pair, its time renewed by a second dismissal;
-- `feedfabric maintain` deletes the rows older than that.
CREATE TABLE suggestion_dismissals (
    member_id     uuid NOT NULL REFERENCES members (id),
    dismissed_id  uuid NOT NULL REFERENCES members (id),
    dismissed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (member_id, dismissed_id)
);
CREATE INDEX suggestion_dismissals_age_idx ON suggestion_dismissals (dismissed_at);
