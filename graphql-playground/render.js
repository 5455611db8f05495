// DOM builders for posts, comments, mentions, notifications and members.
// Text goes in as text nodes (never as HTML); actions are `data-action`
// attributes that app.js handles with one delegated click listener.

/** h("div", {class: "x", dataset: {id}}, child, "text", ...) */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "dataset") Object.assign(element.dataset, value);
    else if (key === "class") element.className = value;
    else element.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export function when(iso) {
  const date = new Date(iso);
  const seconds = (Date.now() - date.getTime()) / 1000;
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return timeFormat.format(date);
}

function initials(member) {
  return member.displayName.split(/\s+/).map((w) => w[0]).join("").slice(0, 2).toUpperCase();
}

export function avatar(member) {
  return member.avatarUrl
    ? h("img", { class: "avatar", src: member.avatarUrl, alt: "" })
    : h("span", { class: "avatar", "aria-hidden": "true" }, initials(member));
}

/** Post text with #tags as buttons that open the tag feed and @mentions highlighted. */
function richText(content) {
  const parts = content.split(/([#@][\p{L}\p{N}_]+)/u);
  return parts.map((part) => {
    if (part.startsWith("#")) {
      return h("button", { class: "tag", dataset: { action: "open-tag", tag: part.slice(1).toLowerCase() } }, part);
    }
    if (part.startsWith("@")) return h("span", { class: "mention" }, part);
    return part;
  });
}

/** Follow and favourite toggles for a member; `viewerId` hides them on the viewer's own posts. */
export function memberActions(member, viewerId) {
  if (member.id === viewerId) return null;
  return h("span", { class: "member-actions" },
    h("button", {
      class: member.viewerFollows ? "chip on" : "chip",
      dataset: { action: "toggle-follow", member: member.externalId, on: member.viewerFollows ? "1" : "" },
    }, member.viewerFollows ? "Following" : "Follow"),
    h("button", {
      class: member.isFavourite ? "chip star on" : "chip star",
      title: member.isFavourite ? "Remove from favourites" : "Add to favourites",
      dataset: { action: "toggle-favourite", member: member.externalId, on: member.isFavourite ? "1" : "" },
    }, member.isFavourite ? "★" : "☆"),
  );
}

function byline(author, createdAt, viewerId) {
  return h("header", { class: "byline" },
    avatar(author),
    h("span", { class: "names" },
      h("strong", {}, author.displayName), " ",
      h("span", { class: "muted" }, `@${author.username} · ${when(createdAt)}`)),
    memberActions(author, viewerId));
}

function mediaList(media) {
  const ready = media.filter((m) => m.url);
  if (!ready.length) return null;
  return h("div", { class: "media" }, ready.map((m) =>
    h("img", { src: m.url, alt: "photo", loading: "lazy", width: m.width, height: m.height })));
}

/**
 * A feed item. A repost shows the shared post, with who shared it above;
 * likes and comments act on the shared post.
 */
export function postCard(post, viewerId) {
  const shown = post.repostOf ?? post;
  const theirs = shown.author.id !== viewerId;
  return h("article", { class: "post", dataset: { id: post.id, shown: shown.id, author: shown.author.externalId } },
    post.repostOf ? h("p", { class: "reposted muted" }, `↻ ${post.author.displayName} reposted`) : null,
    byline(shown.author, shown.createdAt, viewerId),
    h("p", { class: "content" }, richText(shown.content)),
    mediaList(shown.media),
    h("footer", { class: "actions" },
      likeButton(shown),
      h("button", { class: "action", dataset: { action: "toggle-comments", post: shown.id } },
        `Comments ${shown.commentCount}`),
      h("button", { class: "action", dataset: { action: "repost", post: shown.id } }, "↻ Repost"),
      theirs ? h("button", { class: "action safety", dataset: { action: "open-report", post: shown.id, author: shown.author.username } }, "⚑ Report") : null,
      theirs ? h("button", { class: "action safety", dataset: { action: "block", blocked: shown.author.externalId } },
        `⊘ Block @${shown.author.username}`) : null),
    h("section", { class: "comments", hidden: true }));
}

export const REPORT_REASONS = ["SPAM", "HARASSMENT", "HATE", "VIOLENCE", "SEXUAL_CONTENT", "SELF_HARM", "ILLEGAL", "OTHER"];

/** The Report form under a post: a reason, an optional note, and "also block". */
export function reportForm(postId, author) {
  return h("form", { class: "report-form", dataset: { post: postId } },
    h("label", {}, "Reason ",
      h("select", { name: "reason", required: true },
        REPORT_REASONS.map((r) => h("option", { value: r }, r.toLowerCase().replaceAll("_", " "))))),
    h("input", { name: "note", placeholder: "What is wrong with it? (optional)", maxlength: 1000 }),
    h("label", { class: "muted" }, h("input", { type: "checkbox", name: "alsoBlock" }), ` also block @${author}`),
    h("button", { type: "submit" }, "Send report"));
}

/** A report in the moderator's queue, with what it names and the actions that fit it. */
export function reportCard(report) {
  const target = report.post ? `post:${report.post.id}` : report.comment ? `comment:${report.comment.id}` : `member:${report.member.id}`;
  const what = report.post ? h("p", { class: "quote" }, `Post (${report.post.status.toLowerCase()}): “${report.post.content}”`)
    : report.comment ? h("p", { class: "quote" }, `Comment: “${report.comment.content}”`)
    : h("p", { class: "quote" }, `The member @${report.member.username}`);
  const actions = [["DISMISS", "Dismiss"]];
  if (report.post) actions.push(["HOLD_POST", "Hold post"]);
  if (report.comment) actions.push(["DELETE_COMMENT", "Delete comment"]);
  actions.push(["SUSPEND_MEMBER", `Suspend @${report.member.username}`]);
  return h("article", { class: `report ${report.status.toLowerCase()}`, dataset: { id: report.id, target } },
    h("p", {},
      h("strong", {}, report.reason.toLowerCase().replaceAll("_", " ")),
      ` against @${report.member.username} · `,
      h("span", { class: "muted" }, report.reporter ? `by @${report.reporter.username}` : "filed by a moderation term"),
      h("span", { class: "muted" }, ` · ${when(report.createdAt)}`),
      report.openReportsOnTarget > 1 ? h("span", { class: "badge" }, `${report.openReportsOnTarget} reports`) : null),
    what,
    report.note ? h("p", { class: "note" }, report.note) : null,
    report.status === "OPEN"
      ? h("footer", { class: "actions" }, actions.map(([action, label]) =>
        h("button", { class: "chip", dataset: { action: "resolve-report", report: report.id, resolve: action } }, label)))
      : h("p", { class: "muted" }, `${report.status.toLowerCase()}: ${(report.action ?? "").toLowerCase().replaceAll("_", " ")}`));
}

export function likeButton(post) {
  return h("button", {
    class: post.viewerHasLiked ? "action liked" : "action",
    dataset: { action: "toggle-like", post: post.id, on: post.viewerHasLiked ? "1" : "" },
  }, `${post.viewerHasLiked ? "♥" : "♡"} ${post.likeCount}`);
}

export function comment(item) {
  return h("div", { class: "comment" },
    h("strong", {}, item.author.displayName), " ",
    h("span", { class: "muted" }, `@${item.author.username} · ${when(item.createdAt)}`),
    h("p", {}, richText(item.content)));
}

export function commentsSection(post, comments) {
  return [
    ...comments.map(comment),
    comments.length ? null : h("p", { class: "muted" }, "No comments yet."),
    h("form", { class: "comment-form", dataset: { post: post } },
      h("input", { name: "content", placeholder: "Write a comment…", required: true, maxlength: 2000 }),
      h("button", { type: "submit" }, "Comment")),
  ];
}

/** A mentionsFeed item: a Post, or a Comment with the post it belongs to. */
export function mentionItem(node, viewerId) {
  if (node.__typename === "Post") return postCard(node, viewerId);
  return h("article", { class: "post", dataset: { id: node.id } },
    byline(node.author, node.createdAt, viewerId),
    h("p", { class: "muted" }, `commented on @${node.post.author.username}'s post “${node.post.content}”`),
    h("p", { class: "content" }, richText(node.content)));
}

const KIND_TEXT = {
  FOLLOW: "followed you",
  LIKE: "liked your post",
  COMMENT: "commented on your post",
  MENTION: "mentioned you",
  REPOST: "reposted your post",
};

/** "Ava liked your post", "Ava and Ben …", "Ava and 12 others …": a NotificationGroup. */
export function notificationGroup(group) {
  const [first, second] = group.sampleActors;
  const others = group.actorCount - 1;
  const who = !first ? "Someone"
    : others === 0 ? first.displayName
    : others === 1 && second ? `${first.displayName} and ${second.displayName}`
    : `${first.displayName} and ${others} others`;
  return h("article", {
    class: group.read ? "notification" : "notification unread",
    dataset: { key: group.key, count: String(group.actorCount) },
  },
    h("div", { class: "actors" }, ...group.sampleActors.map(avatar)),
    h("p", {},
      h("strong", {}, who), ` ${KIND_TEXT[group.kind] ?? group.kind.toLowerCase()}`,
      h("span", { class: "muted" }, ` · ${when(group.latestAt)}`)),
    group.comment ? h("p", { class: "quote" }, group.comment.content)
      : group.post ? h("p", { class: "quote" }, group.post.content) : null,
    group.read ? null : h("button", { class: "action", dataset: { action: "read-group", key: group.key } }, "Mark read"));
}

export function memberRow(member, viewerId) {
  return h("article", { class: "member", dataset: { id: member.id } },
    avatar(member),
    h("span", { class: "names" },
      h("strong", {}, member.displayName), " ", h("span", { class: "muted" }, `@${member.username}`),
      h("br"),
      h("span", { class: "muted" }, `${member.followerCount} followers · ${member.followingCount} following`)),
    memberActions(member, viewerId));
}
