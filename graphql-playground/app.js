// The playground: sign in as a demo member, read the feeds with infinite
// scroll, post (with a photo), follow, favourite, like and comment, and watch
// the Following feed update live over graphql-transport-ws.

import { GraphQLClient, operation } from "./graphql.js";
import { TransportWsClient } from "./transport-ws.js";
import * as render from "./render.js";
import { getStartedView } from "./get-started.js";

const { h } = render;
const PAGE_SIZE = 20;
const MEDIA_POLL_MS = 400;
const MEDIA_POLL_LIMIT_MS = 60_000;
const SESSION_KEY = "feedfabric.http.playground.as";

const $ = (selector) => document.querySelector(selector);
const api = new GraphQLClient(new URL("/graphql", location.origin).href);

// Everything the page knows; one place, reset on sign-in.
const state = {
  viewer: null,
  socket: null,
  view: { name: "home", tag: null },
  list: null,            // the current paged list (see openView)
  pending: [],           // live home items not shown yet, oldest first
  shownIds: new Set(),   // home items on the page (a live item already shown is skipped)
  newestHomeCursor: null,
  unread: 0,
};

// Each view: how to fetch a page and how to render one item.
const VIEWS = {
  home: {
    title: "Following",
    page: async (after) => connection((await api.run("HomeFeed", { first: PAGE_SIZE, after })).homeFeed),
    item: (node) => render.postCard(node, state.viewer.id),
  },
  favourites: {
    title: "Favourites",
    page: async (after) => connection((await api.run("FavouritesFeed", { first: PAGE_SIZE, after })).favouritesFeed),
    item: (node) => render.postCard(node, state.viewer.id),
  },
  tag: {
    title: "Tag",
    page: async (after) =>
      connection((await api.run("TagFeed", { tag: state.view.tag, first: PAGE_SIZE, after })).tagFeed),
    item: (node) => render.postCard(node, state.viewer.id),
  },
  mentions: {
    title: "Mentions",
    page: async (after) => connection((await api.run("MentionsFeed", { first: PAGE_SIZE, after })).mentionsFeed),
    item: (node) => render.mentionItem(node, state.viewer.id),
  },
  notifications: {
    title: "Notifications",
    page: async (after) => {
      const data = (await api.run("NotificationGroups", { first: PAGE_SIZE, after })).notificationGroups;
      setUnread(data.unreadCount);
      return connection(data);
    },
    item: (node) => render.notificationGroup(node),
  },
  people: {
    title: "People",
    page: async () => {
      const { members } = await devJson("/dev/members");
      const cards = await Promise.all(members.map((m) => api.run("Member", { externalId: m.externalId, first: 1 })));
      return { nodes: cards.map((c) => c.member).filter(Boolean), hasNextPage: false, endCursor: null };
    },
    item: (node) => render.memberRow(node, state.viewer.id),
  },
  start: getStartedView({ api, render, viewerId: () => state.viewer.id, showError: (error) => showError(error) }),
  reports: {
    title: "Reports",
    page: async (after) => connection((await api.run("Reports", { first: PAGE_SIZE, after })).reports),
    item: (node) => render.reportCard(node),
  },
};

function connection(conn) {
  return {
    nodes: conn.edges.map((e) => e.node),
    cursors: conn.edges.map((e) => e.cursor),
    hasNextPage: conn.pageInfo.hasNextPage,
    endCursor: conn.pageInfo.endCursor,
    source: conn.source ?? null,
  };
}

// ---------------------------------------------------------------- sign-in

// The dev stack's secret, from the URL `feedfabric dev` prints (#dev-secret=...): /dev/token asks for it
// before it mints the admin's token. Kept for the tab's session, and out of the address bar.
const DEV_SECRET_KEY = "feedfabric.devSecret";
const fromUrl = new URLSearchParams(location.hash.slice(1)).get("dev-secret");
if (fromUrl) {
  sessionStorage.setItem(DEV_SECRET_KEY, fromUrl);
  history.replaceState(null, "", location.pathname + location.search);
}

async function devJson(path) {
  const secret = sessionStorage.getItem(DEV_SECRET_KEY);
  const response = await fetch(path, { headers: secret ? { "X-Dev-Secret": secret } : {} });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status} (is FEEDFABRIC_DEV_MODE on?)`);
  return response.json();
}

async function loadMemberPicker() {
  const picker = $("#member-picker");
  try {
    const { members } = await devJson("/dev/members");
    picker.replaceChildren(...members.map((m) =>
      h("option", { value: m.externalId }, `${m.displayName} (${m.externalId})`)));
    return members;
  } catch (error) {
    picker.replaceChildren(h("option", { value: "" }, "dev routes off"));
    showError(error);
    return [];
  }
}

async function signIn(externalId) {
  const { token } = await devJson(`/dev/token?externalId=${encodeURIComponent(externalId)}`);
  api.token = token;
  const { viewer } = await api.run("Viewer");
  if (!viewer) throw new Error(`${externalId} has no profile`);
  sessionStorage.setItem(SESSION_KEY, externalId);
  state.viewer = viewer;
  state.socket?.dispose();
  state.socket = null;
  $("#member-picker").value = externalId;
  $("#whoami").textContent = `Signed in as ${viewer.displayName} (@${viewer.username})`;
  document.body.classList.add("signed-in");
  document.body.dataset.viewer = externalId;
  await openView("home");
  startLive(token);
  refreshUnread();
  showReportsTabIfModerator();
}

/** The Reports tab is a moderator's: shown when the queue answers this token (FORBIDDEN otherwise). */
async function showReportsTabIfModerator() {
  const tab = $("#reports-tab");
  tab.hidden = true;
  try {
    await api.run("Reports", { first: 1 });
    tab.hidden = false;
  } catch (error) {
    if (error.code !== "FORBIDDEN") showError(error);
  }
}

// ---------------------------------------------------------------- paged lists

/** Shows a view from its first page; further pages load when the list's end scrolls into sight. */
async function openView(name, tag = null) {
  state.view = { name, tag };
  for (const tab of document.querySelectorAll("[data-view]")) tab.classList.toggle("active", tab.dataset.view === name);
  $("#view-title").textContent = name === "tag" ? `#${tag}` : VIEWS[name].title;
  $("#mark-read").hidden = name !== "notifications";
  $("#feed").replaceChildren();
  $("#source").textContent = "";
  if (name === "home") {
    state.pending = [];
    state.shownIds = new Set();
    state.newestHomeCursor = null;
    updateBanner();
  }
  state.list = { view: name, endCursor: null, hasNextPage: true, loading: false, pages: 0 };
  await loadNextPage();
}

async function loadNextPage() {
  const list = state.list;
  if (!list || list.loading || !list.hasNextPage) return;
  list.loading = true;
  $("#loading").hidden = false;
  try {
    const page = await VIEWS[list.view].page(list.endCursor);
    if (state.list !== list) return; // the view changed meanwhile
    list.pages += 1;
    list.endCursor = page.endCursor;
    list.hasNextPage = page.hasNextPage;
    if (list.view === "home") {
      page.nodes.forEach((n) => state.shownIds.add(n.id));
      if (list.pages === 1) state.newestHomeCursor = page.cursors[0] ?? null;
    }
    if (page.source) $("#source").textContent = `source: ${page.source}`;
    $("#feed").append(...page.nodes.map((node) => VIEWS[list.view].item(node)));
    if (list.pages === 1 && !page.nodes.length) $("#feed").append(h("p", { class: "empty muted" }, "Nothing here yet."));
    $("#end").textContent = list.hasNextPage ? "" : list.pages > 1 || page.nodes.length ? "— the end —" : "";
  } catch (error) {
    showError(error);
    list.hasNextPage = false;
  } finally {
    list.loading = false;
    $("#loading").hidden = true;
  }
  // A short page may leave the end in sight: keep filling.
  if (state.list === list && list.hasNextPage && endInSight()) loadNextPage();
}

function endInSight() {
  return $("#sentinel").getBoundingClientRect().top < window.innerHeight + 200;
}

// ---------------------------------------------------------------- live updates

/** homeTimeline resumes from the newest item the page knows; notificationGroupUpdated redraws a group
 * in place (moved to the top) and refreshes the badge. */
async function startLive(token) {
  const url = new URL("/graphql", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const socket = new TransportWsClient(url.href, { authorization: `Bearer ${token}` }, (s) => {
    $("#live").textContent = { open: "● live", connecting: "○ connecting", closed: "○ offline", refused: "✕ refused" }[s];
    $("#live").dataset.state = s;
  });
  state.socket = socket;
  const [timeline, groups] = await Promise.all([operation("HomeTimeline"), operation("NotificationGroupUpdated")]);
  if (state.socket !== socket) return;
  socket.subscribe(timeline, () => (state.newestHomeCursor ? { since: state.newestHomeCursor } : {}), {
    next: (data) => receiveTimelineItem(data.homeTimeline),
    error: (errors) => showError(errors),
  });
  socket.subscribe(groups, {}, {
    next: (data) => {
      refreshUnread(); // asked, not counted: a group changed while the page loaded is not counted twice
      if (state.view.name === "notifications") showGroup(data.notificationGroupUpdated);
    },
    error: (errors) => showError(errors),
  });
}

/** A group sent at zero was taken back whole (every like of it undone): it is dropped, not drawn. */
function showGroup(group) {
  const feed = $("#feed");
  feed.querySelector(`article.notification[data-key="${CSS.escape(group.key)}"]`)?.remove();
  if (group.notificationCount === 0) return;
  feed.querySelector(".empty")?.remove();
  feed.prepend(render.notificationGroup(group));
}

function receiveTimelineItem({ cursor, post }) {
  if (!state.newestHomeCursor || cursor > state.newestHomeCursor) state.newestHomeCursor = cursor;
  if (state.shownIds.has(post.id) || state.pending.some((p) => p.id === post.id)) return;
  state.pending.push(post);
  updateBanner();
}

function updateBanner() {
  const count = state.pending.length;
  const banner = $("#new-posts");
  banner.hidden = count === 0 || state.view.name !== "home";
  banner.textContent = `${count} new post${count === 1 ? "" : "s"} — show`;
  $("#home-count").textContent = count ? String(count) : "";
}

function showPending() {
  const feed = $("#feed");
  feed.querySelector(".empty")?.remove();
  // Pending items arrived oldest first; the newest ends up on top.
  for (const post of state.pending) {
    state.shownIds.add(post.id);
    feed.prepend(render.postCard(post, state.viewer.id));
  }
  state.pending = [];
  updateBanner();
  window.scrollTo({ top: 0, behavior: "smooth" });
}

function setUnread(count) {
  state.unread = Math.max(0, count);
  $("#unread").textContent = state.unread ? String(state.unread) : "";
}

async function refreshUnread() {
  try {
    setUnread((await api.run("NotificationGroups", { first: 1 })).notificationGroups.unreadCount);
  } catch (error) {
    showError(error);
  }
}

// ---------------------------------------------------------------- writing

async function publish(form) {
  const content = form.content.value.trim();
  const file = form.photo.files[0];
  if (!content) return;
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  try {
    const mediaIds = file ? [await uploadPhoto(file)] : null;
    setStatus("Posting…");
    const { createPost } = await api.run("CreatePost", { content, mediaIds });
    form.reset();
    setStatus("Posted.");
    if (state.view.name === "home") {
      state.shownIds.add(createPost.id);
      $("#feed").querySelector(".empty")?.remove();
      $("#feed").prepend(render.postCard(createPost, state.viewer.id));
    }
  } catch (error) {
    setStatus("");
    showError(error);
  } finally {
    button.disabled = false;
  }
}

/** uploadMedia (multipart), then polls the Media query until worker-media says READY. */
async function uploadPhoto(file) {
  setStatus("Uploading photo…");
  const { uploadMedia } = await api.upload("UploadMedia", {}, "file", file);
  const deadline = Date.now() + MEDIA_POLL_LIMIT_MS;
  let media = uploadMedia;
  while (media.status === "PENDING") {
    if (Date.now() > deadline) throw new Error("the photo is still processing; try again later");
    setStatus("Processing photo…");
    await new Promise((resolve) => setTimeout(resolve, MEDIA_POLL_MS));
    media = (await api.run("Media", { id: media.id })).media;
  }
  if (media.status !== "READY") throw new Error("the photo was rejected");
  return media.id;
}

let statusTimer = null;

/** The composer's progress line; "Posted." fades after a few seconds. */
function setStatus(text) {
  clearTimeout(statusTimer);
  $("#compose-status").textContent = text;
  if (text === "Posted.") statusTimer = setTimeout(() => setStatus(""), 4000);
}

// One listener for every button inside the feed (see render.js data-action).
const ACTIONS = {
  "open-tag": (el) => openView("tag", el.dataset.tag),
  "read-group": async (el) => {
    const { markNotificationGroupRead } = await api.run("MarkNotificationGroupRead", { key: el.dataset.key });
    el.closest("article").replaceWith(render.notificationGroup(markNotificationGroupRead));
    refreshUnread();
  },
  "toggle-like": async (el) => {
    const on = Boolean(el.dataset.on);
    const data = await api.run(on ? "UnlikePost" : "LikePost", { postId: el.dataset.post });
    el.replaceWith(render.likeButton(data.unlikePost ?? data.likePost));
  },
  "toggle-follow": async (el) => {
    const on = Boolean(el.dataset.on);
    const data = await api.run(on ? "Unfollow" : "Follow", { externalUserId: el.dataset.member });
    refreshMemberActions(data.unfollow ?? data.follow);
  },
  "toggle-favourite": async (el) => {
    const on = Boolean(el.dataset.on);
    const data = await api.run(on ? "RemoveFavourite" : "AddFavourite", { externalUserId: el.dataset.member });
    refreshMemberActions(data.removeFavourite ?? data.addFavourite);
  },
  repost: async (el) => {
    await api.run("Repost", { postId: el.dataset.post });
    el.textContent = "↻ Reposted";
    el.disabled = true;
  },
  "open-report": (el) => {
    const card = el.closest(".post");
    const open = card.querySelector(".report-form");
    if (open) return open.remove();
    card.append(render.reportForm(el.dataset.post, el.dataset.author));
  },
  block: async (el) => {
    const blocked = el.dataset.blocked;
    await api.run("Block", { externalUserId: blocked });
    hideAuthor(blocked);
    toast(`Blocked. You will not see each other's posts.`);
  },
  "resolve-report": async (el) => {
    const { resolveReport } = await api.run("ResolveReport", { id: el.dataset.report, action: el.dataset.resolve });
    // Every open report on the target was resolved the same way: their cards go with this one.
    const target = el.closest("article.report").dataset.target;
    for (const card of document.querySelectorAll(`#feed article.report[data-target="${CSS.escape(target)}"]`)) {
      card.remove();
    }
    toast(`Resolved: ${resolveReport.action.toLowerCase().replaceAll("_", " ")}.`);
    if (!$("#feed").querySelector("article.report")) $("#feed").append(h("p", { class: "empty muted" }, "The queue is empty."));
  },
  "toggle-comments": async (el) => {
    const section = el.closest(".post").querySelector(".comments");
    if (!section.hidden) return (section.hidden = true);
    const { post } = await api.run("Post", { id: el.dataset.post });
    section.replaceChildren(...render.commentsSection(post.id, post.comments.edges.map((e) => e.node)));
    section.hidden = false;
    section.querySelector("input").focus();
  },
};

/** Every follow/favourite toggle of that member on the page shows its new state. */
function refreshMemberActions(member) {
  for (const el of document.querySelectorAll(`[data-member="${CSS.escape(member.externalId)}"]`)) {
    const holder = el.closest(".member-actions");
    if (holder) holder.replaceWith(render.memberActions(member, state.viewer.id));
  }
}

/** A blocked member's posts leave the page at once (the API already leaves them out of every read). */
function hideAuthor(externalId) {
  for (const card of document.querySelectorAll(`#feed article.post[data-author="${CSS.escape(externalId)}"]`)) {
    card.remove();
  }
}

async function sendReport(form) {
  const input = { postId: form.dataset.post, reason: form.reason.value, alsoBlock: form.alsoBlock.checked };
  if (form.note.value.trim()) input.note = form.note.value;
  const { report } = await api.run("Report", { input });
  if (input.alsoBlock) hideAuthor(report.member.externalId);
  form.replaceWith(h("p", { class: "reported muted" }, "Reported. A moderator will look at it."));
  toast("Thanks: your report is in the moderators' queue.");
}

async function addComment(form) {
  const input = form.content;
  const { addComment } = await api.run("AddComment", { postId: form.dataset.post, content: input.value });
  form.before(render.comment(addComment));
  form.parentElement.querySelector(":scope > p.muted")?.remove();
  const counter = form.closest(".post").querySelector('[data-action="toggle-comments"]');
  counter.textContent = `Comments ${addComment.post.commentCount}`;
  input.value = "";
}

// ---------------------------------------------------------------- errors

function toast(message) {
  const note = h("div", { class: "toast", role: "status" }, message);
  $("#toasts").append(note);
  setTimeout(() => note.remove(), 6000);
}

function showError(error) {
  const message = Array.isArray(error) ? error.map((e) => e.message).join("; ") : error.message ?? String(error);
  console.error(error);
  const toast = h("div", { class: "toast", role: "alert" }, message);
  $("#toasts").append(toast);
  setTimeout(() => toast.remove(), 6000);
}

// ---------------------------------------------------------------- wiring

function wire() {
  $("#sign-in").addEventListener("submit", (event) => {
    event.preventDefault();
    signIn($("#member-picker").value).catch(showError);
  });
  for (const tab of document.querySelectorAll("[data-view]")) {
    tab.addEventListener("click", () => state.viewer && openView(tab.dataset.view).catch(showError));
  }
  $("#tag-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const tag = event.target.tag.value.trim().replace(/^#/, "").toLowerCase();
    if (tag && state.viewer) openView("tag", tag).catch(showError);
  });
  $("#compose").addEventListener("submit", (event) => {
    event.preventDefault();
    publish(event.target);
  });
  $("#new-posts").addEventListener("click", showPending);
  $("#mark-read").addEventListener("click", async () => {
    try {
      await api.run("MarkNotificationsRead");
      await openView("notifications");
    } catch (error) {
      showError(error);
    }
  });
  $("#feed").addEventListener("click", (event) => {
    const el = event.target.closest("[data-action]");
    if (!el) return;
    el.disabled = true;
    Promise.resolve(ACTIONS[el.dataset.action](el)).catch(showError).finally(() => (el.disabled = false));
  });
  $("#feed").addEventListener("submit", (event) => {
    event.preventDefault();
    const form = event.target;
    (form.classList.contains("report-form") ? sendReport(form) : addComment(form)).catch(showError);
  });
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadNextPage();
  }, { rootMargin: "200px" }).observe($("#sentinel"));
}

async function main() {
  wire();
  const members = await loadMemberPicker();
  const wanted = new URLSearchParams(location.search).get("as") ?? sessionStorage.getItem(SESSION_KEY);
  if (wanted && members.some((m) => m.externalId === wanted)) await signIn(wanted).catch(showError);
}

main();
