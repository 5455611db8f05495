// "Get started": a new member picks topics, follows suggested members and sees their first For You
// page, each step redrawing the next (a picked topic changes who is suggested; a follow, the page).
// Self-contained: app.js registers the view; its buttons carry data-start, not data-action, so the
// feed's own click handler leaves them to this module (the For You cards inside keep theirs).

const REASONS = {
  FOLLOWED_BY_PEOPLE_YOU_FOLLOW: "Followed by people you follow",
  SIMILAR_ENGAGEMENT: "Liked by people who like what you like",
  POPULAR_IN_YOUR_TOPICS: "Popular in your topics",
  POPULAR: "Popular",
};
const TOPICS = 12;
const MEMBERS = 8;
const FOR_YOU = 10;

/** The view for app.js's VIEWS: one item, the whole panel. */
export function getStartedView({ api, render, viewerId, showError }) {
  const { h } = render;

  async function topicsPart() {
    const [{ followedTags }, { suggestedTopics }] = await Promise.all([
      api.run("FollowedTags"),
      api.run("SuggestedTopics", { first: TOPICS }),
    ]);
    const picked = followedTags.map((tag) =>
      h("button", { class: "chip on", dataset: { start: "unpick", topic: tag } }, `#${tag} ✓`));
    const offered = suggestedTopics.map((t) =>
      h("button", { class: "chip", title: REASONS[t.reason], dataset: { start: "pick", topic: t.tag } },
        `#${t.tag} · ${t.recentPostCount}`));
    return h("div", { class: "topics" }, ...picked, ...offered,
      !picked.length && !offered.length ? h("p", { class: "muted" }, "No topics yet.") : null);
  }

  async function membersPart() {
    const { suggestedMembers } = await api.run("SuggestedMembers", { first: MEMBERS });
    if (!suggestedMembers.length) return h("p", { class: "muted" }, "No suggestions right now.");
    return h("div", { class: "suggestions" }, ...suggestedMembers.map(({ member, reason }) =>
      h("article", { class: "member suggestion", dataset: { member: member.externalId, reason } },
        render.avatar(member),
        h("span", { class: "names" },
          h("strong", {}, member.displayName), " ", h("span", { class: "muted" }, `@${member.username}`),
          h("br"), h("span", { class: "reason muted" }, REASONS[reason] ?? reason)),
        h("button", { class: "chip", dataset: { start: "follow", member: member.externalId } }, "Follow"),
        h("button", { class: "chip", title: "Not for 30 days", dataset: { start: "dismiss", member: member.externalId } },
          "✕"))));
  }

  async function forYouPart() {
    const { forYouFeed } = await api.run("ForYouFeed", { first: FOR_YOU });
    const cards = forYouFeed.edges.map((e) => render.postCard(e.node, viewerId()));
    return h("div", { class: "foryou" }, ...(cards.length ? cards : [h("p", { class: "muted" }, "Nothing yet: pick a topic.")]));
  }

  /** Redraws the named parts of the panel from the API. */
  async function refresh(panel, parts) {
    const builders = { topics: topicsPart, members: membersPart, foryou: forYouPart };
    const built = await Promise.all(parts.map((name) => builders[name]()));
    parts.forEach((name, n) => panel.querySelector(`[data-part="${name}"]`).replaceChildren(built[n]));
    panel.dataset.ready = String(Number(panel.dataset.ready ?? 0) + 1);
  }

  const STEPS = {
    pick: (el) => api.run("FollowTag", { tag: el.dataset.topic }).then(() => ["topics", "members", "foryou"]),
    unpick: (el) => api.run("UnfollowTag", { tag: el.dataset.topic }).then(() => ["topics", "members", "foryou"]),
    follow: (el) => api.run("Follow", { externalUserId: el.dataset.member }).then(() => ["members", "foryou"]),
    dismiss: (el) => api.run("DismissSuggestion", { externalUserId: el.dataset.member }).then(() => ["members"]),
  };

  async function panel() {
    const root = h("section", { id: "get-started" },
      h("h3", {}, "1. Pick topics"), h("div", { dataset: { part: "topics" } }),
      h("h3", {}, "2. Follow people"), h("div", { dataset: { part: "members" } }),
      h("h3", {}, "3. Your first For You page"), h("div", { dataset: { part: "foryou" } }));
    root.addEventListener("click", (event) => {
      const el = event.target.closest("[data-start]");
      if (!el) return;
      el.disabled = true;
      STEPS[el.dataset.start](el).then((parts) => refresh(root, parts)).catch((error) => {
        el.disabled = false;
        showError(error);
      });
    });
    await refresh(root, ["topics", "members", "foryou"]);
    return root;
  }

  return {
    title: "Get started",
    page: async () => ({ nodes: [await panel()], hasNextPage: false, endCursor: null }),
    item: (node) => node,
  };
}
