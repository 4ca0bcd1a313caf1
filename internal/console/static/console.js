// oncepush console: one page, hash routes, the public HTTP API only.
//
// The API key is entered once per tab and kept in sessionStorage; it is
// sent as "Authorization: Bearer …" on each request and never put in a URL.
// Everything shown is inserted as text (textContent), never as HTML.

const KEY = "oncepush.apiKey";
const REFRESH_MS = 5000; // the backlog view's refresh

const $ = (id) => document.getElementById(id);

// el builds an element: attrs are properties or attributes ("data-…",
// "aria-…"), children are nodes or strings (text).
function el(tag, attrs = {}, ...children) {
  const svg = ["svg", "rect", "line", "text", "g", "title"].includes(tag);
  const e = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (svg || k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "for" || k === "scope") {
      e.setAttribute(k, String(v));
    } else {
      e[k] = v;
    }
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  }
  return e;
}

// ApiError is a problem+json answer (or a failure to get one).
class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body, key = sessionStorage.getItem(KEY)) {
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, { title: "The server cannot be reached", code: "network", detail: String(err.message || err) });
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    throw new ApiError(res.status, json && json.code ? json : { title: `HTTP ${res.status}`, code: "http_" + res.status, detail: text.slice(0, 200) });
  }
  return json;
}

// explain says plainly what a problem means for the operator.
function explain(err) {
  const p = err.problem || {};
  switch (p.code) {
    case "unauthorized":
      return `The API key was refused: ${p.detail}. Enter a valid key.`;
    case "forbidden":
      return `The API key is valid but not allowed to do this: ${p.detail}.`;
    case "not_found":
      return `Not found: ${p.detail}.`;
    case "campaign_state":
      return `The campaign's status does not allow this: ${p.detail}.`;
    case "unavailable":
      return `The server cannot reach its database right now: ${p.detail}. Try again shortly.`;
    default:
      return p.detail || err.message;
  }
}

// fill replaces a container's children; arrays are spread, empty values
// left out.
function fill(container, ...children) {
  container.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

function showError(err) {
  const box = $("error");
  box.replaceChildren(
    el("strong", {}, `${err.problem?.title || "Error"} (${err.problem?.code || "error"}, HTTP ${err.status})`),
    el("span", { className: "error-text" }, explain(err)),
  );
  box.dataset.code = err.problem?.code || "";
  box.hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error").replaceChildren();
  delete $("error").dataset.code;
}

// --- formatting

const fmtTime = (s) => (s ? s.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "—");

function fmtAge(seconds) {
  if (!seconds) return "none due";
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

const pct = (x) => `${(x * 100).toFixed(1)} %`;

function table(head, rows, caption, className) {
  return el(
    "div",
    { className: "table" },
    el(
      "table",
      { className: className || "" },
      caption ? el("caption", { className: "hint" }, caption) : null,
      el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col", className: h.num ? "num" : "" }, h.label ?? h)))),
      el("tbody", {}, rows),
    ),
  );
}

// --- outcomes and "sent twice?"

// What each delivery status means, in a word an operator scans for; the
// ones that did not reach the recipient are marked (bad), in words too.
const deliveryStatuses = ["pending", "sent", "failed", "ambiguous", "skipped", "no_devices", "expired", "canceled"];
const statusWords = {
  pending: "Pending", sent: "Sent", failed: "Failed", ambiguous: "Ambiguous", skipped: "Skipped",
  no_devices: "No devices", expired: "Expired", canceled: "Canceled",
};
const badStatuses = ["failed", "ambiguous", "no_devices", "expired"];

function statusBadge(status) {
  return el("span", { className: `status${badStatuses.includes(status) ? " bad" : ""}`, "data-status": status }, statusWords[status] || status);
}

// countsText says a notification's counts in words, the bad ones first:
// "2 failed · 1 no devices · 3 sent".
function countsText(counts) {
  const order = [...badStatuses, ...deliveryStatuses.filter((s) => !badStatuses.includes(s))];
  return order.filter((s) => counts[s] > 0).map((s) => `${counts[s]} ${statusWords[s].toLowerCase()}`).join(" · ") || "no deliveries";
}

const needsAttention = (counts) => badStatuses.some((s) => counts[s] > 0);

const devName = (a) => `device ${a.deviceId} (${a.transport})`;
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

// verdictOf says whether the delivery reached its devices, and how often,
// by the server's count of the submissions that may have reached each
// device (reachedAtMost): a submission refused with "retry later",
// "rejected" or "invalid token" reached nothing, so a retry is no second
// copy; a resend after a lost answer may be.
function verdictOf(d) {
  const devs = d.devices || [];
  const twice = devs.filter((a) => a.reachedAtMost > 1);
  if (twice.length) {
    return { kind: "twice", text: `Maybe twice: ${twice.map(devName).join(" and ")} ${twice.length === 1 ? "was" : "were"} sent it again after an answer was lost, so it may have arrived twice (the same collapse id usually replaces the first)` };
  }
  if (!devs.some((a) => a.submissions > 0)) return { kind: "none", text: "Not sent: no device was submitted it" };
  const reached = devs.filter((a) => a.reachedAtMost > 0);
  if (!reached.length) return { kind: "refused", text: "Not received: every submission was refused by the provider" };
  const unsure = reached.filter((a) => a.ambiguous > 0);
  if (unsure.length) {
    return { kind: "maybe", text: `At most once: the answer for ${unsure.map(devName).join(" and ")} was lost, so it may have arrived or not` };
  }
  const retried = reached.filter((a) => a.submissions > 1);
  const after = retried.map((a) => `${devName(a)} took it after ${plural(a.submissions - 1, "refusal", "refusals")}, which reached nothing`);
  return { kind: "once", text: `Sent once to each device that took it${after.length ? ` (${after.join("; ")})` : ""}` };
}

// attemptRows are the device attempts; each cell names its column
// (data-label), which the phone layout shows beside the value.
function attemptRows(d) {
  return (d.devices || []).map((a) =>
    el(
      "tr",
      { "data-device-id": a.deviceId },
      el("td", { className: "num", "data-label": "Device" }, `${a.deviceId} ${a.transport}`),
      el("td", { className: "state", "data-label": "State" }, a.state),
      el("td", { className: "num submissions", "data-label": "Submissions" }, a.submissions),
      el("td", { className: "num lost", "data-label": "Answers lost" }, a.ambiguous),
      el("td", { className: "mono provider-id", "data-label": "Provider id" }, a.providerId || "—"),
      el("td", { className: "attempt-error", "data-label": "Provider said" }, a.error || "—"),
      el("td", { "data-label": "Last sent" }, fmtTime(a.lastSentAt)),
    ),
  );
}

const attemptHead = [
  "Device", "State", { label: "Submissions", num: true }, { label: "Answers lost", num: true }, "Provider id", "Provider said", "Last sent",
];

function deliveryCard(d, { showNotification = true, showRecipient = false } = {}) {
  const v = verdictOf(d);
  // A sent delivery keeps the text of an earlier refusal, or of another
  // device's: history, not why it failed, so it is not shown as its error.
  const why = d.lastError && d.status !== "sent"
    ? el("p", { className: "last-error" }, el("strong", {}, d.status === "pending" ? "Last answer: " : "Why: "), d.lastError)
    : null;
  return el(
    "article",
    { className: "delivery", "data-delivery-id": d.id, "data-status": d.status, "aria-labelledby": `delivery-${d.id}` },
    el(
      "h3",
      { id: `delivery-${d.id}` },
      statusBadge(d.status), " ",
      showNotification ? el("a", { href: `#/notification/${d.notificationId}` }, d.title || d.type || `notification ${d.notificationId}`) : d.title || d.type || "",
      showRecipient ? [" to ", el("a", { href: `#/recipient/${encodeURIComponent(d.recipient)}` }, d.recipient)] : null,
      el("span", { className: "hint" }, ` · delivery ${d.id}`),
    ),
    el("p", { className: `verdict ${v.kind}`, "data-verdict": v.kind }, `${v.text}.`),
    why,
    el(
      "details",
      { className: "more" },
      el("summary", {}, "Ids and times"),
      el(
        "dl",
        { className: "facts" },
        el("dt", {}, "oncepush id"), el("dd", { className: "mono" }, d.oncepushId),
        d.dedupeKey ? [el("dt", {}, "Dedup key"), el("dd", { className: "mono" }, d.dedupeKey)] : null,
        el("dt", {}, "Created"), el("dd", {}, fmtTime(d.createdAt)),
        d.finishedAt ? [el("dt", {}, "Finished"), el("dd", {}, fmtTime(d.finishedAt))] : null,
        d.nextAttemptAt ? [el("dt", {}, "Next attempt"), el("dd", {}, fmtTime(d.nextAttemptAt))] : null,
        el("dt", {}, "Retries counted"), el("dd", {}, String(d.attempts)),
        d.status === "sent" && d.lastError ? [el("dt", {}, "Earlier or other answer"), el("dd", { className: "earlier-error" }, d.lastError)] : null,
      ),
    ),
    d.devices.length ? table(attemptHead, attemptRows(d), null, "attempts") : null,
  );
}

// summaryOf answers "could a device have it twice?" for a page of
// deliveries.
function summaryOf(deliveries) {
  const ids = (ds) => ds.map((d) => d.id).join(", ");
  const twice = deliveries.filter((d) => d.mayHaveReachedTwice);
  const maybe = deliveries.filter((d) => verdictOf(d).kind === "maybe");
  const byId = new Map();
  for (const d of deliveries.filter((d) => (d.devices || []).some((a) => a.reachedAtMost > 0))) {
    byId.set(d.oncepushId, [...(byId.get(d.oncepushId) || []), d.id]);
  }
  const repeated = [...byId.values()].filter((ds) => ds.length > 1);
  const lines = [];
  if (repeated.length) lines.push(`Yes: the same notification id reached a device in several deliveries (${repeated.map((ds) => ds.join(" and ")).join("; ")}).`);
  if (twice.length) lines.push(`Maybe: ${plural(twice.length, "delivery was", "deliveries were")} sent to a device again after an answer was lost (${ids(twice)}).`);
  if (maybe.length) lines.push(`At most once: ${plural(maybe.length, "delivery", "deliveries")} lost an answer and ${maybe.length === 1 ? "was" : "were"} not sent again (${ids(maybe)}).`);
  if (!lines.length) lines.push(`No: each device got each notification at most once (${plural(deliveries.length, "delivery", "deliveries")} on this page; a retry after a refusal is not a second copy).`);
  const kind = repeated.length || twice.length ? "twice" : maybe.length ? "maybe" : "once";
  return el("div", { className: "summary", id: "twice-summary", "data-verdict": kind }, el("strong", {}, "Could a device have it twice? "), lines.join(" "));
}

// --- campaigns

const CAMPAIGN_PAGE = 20; // campaigns per page of the list
const DELIVERY_PAGE = 10; // deliveries per page of a notification's fan-out
const campaignStatuses = ["draft", "scheduled", "sending", "completed", "interrupted", "canceled"];

// What each status means, in words (the status is never a colour alone).
const campaignStatusWords = {
  draft: "not started; its content and audience can still change",
  scheduled: "starts by itself at its start time",
  sending: "started: its deliveries are being written and delivered",
  completed: "every delivery is written; the queued ones are still to be delivered",
  interrupted: "writing its deliveries failed too many times in a row: resume or cancel it",
  canceled: "final: nothing more of it is sent",
};

// The operations a campaign's page offers, where they can change
// something. The server decides (a page read a moment ago may be stale),
// and its refusal is shown in its own words. Cancel is offered on a
// completed campaign while deliveries of it are still queued: a paced
// campaign is completed (all written) long before its last send.
const campaignActions = [
  {
    op: "start", label: "Start now…", offered: (c) => ["draft", "scheduled"].includes(c.status), danger: false,
    ask: (c) => `Start campaign ${c.id} now? Its deliveries are written and sent from this moment, to its whole audience.`,
    yes: "Yes, start it now", done: "Started",
  },
  {
    op: "cancel", label: "Cancel…", danger: true,
    offered: (c) => ["draft", "scheduled", "sending", "interrupted"].includes(c.status) || (c.status === "completed" && c.totals?.queued > 0),
    ask: (c) => `Cancel campaign ${c.id}? Its pending deliveries end canceled and nothing more of it is sent; sends already with a provider may finish. This cannot be undone.`,
    yes: "Yes, cancel the campaign", done: "Canceled",
  },
  {
    op: "resume", label: "Resume…", offered: (c) => c.status === "interrupted", danger: false,
    ask: (c) => `Resume campaign ${c.id} from its cursor? Recipients already written get no second delivery.`,
    yes: "Yes, resume it", done: "Resumed",
  },
];

function audienceText(c) {
  const who = c.audience === "recipients" ? `uploaded recipients (${c.recipients})` : "every registered device";
  const f = c.filter || {};
  const parts = [];
  if (f.transports?.length) parts.push(`transports ${f.transports.join(", ")}`);
  if (f.platforms?.length) parts.push(`platforms ${f.platforms.join(", ")}`);
  if (f.locales?.length) parts.push(`locales ${f.locales.join(", ")}`);
  if (f.tags?.length) parts.push(`tags all of ${f.tags.join(", ")}`);
  return parts.length ? `${who}, devices with ${parts.join("; ")}` : who;
}

function pacingText(c) {
  if (c.ratePerMinute > 0) return `${c.ratePerMinute} deliveries a minute`;
  const l = c.localTime;
  if (l) return `at ${l.time} on ${l.date} in each recipient's own time zone (${l.defaultZone || "UTC"} when unknown)`;
  return "none: as fast as the workers deliver";
}

// The totals, each a row with its word, its meaning and its number.
const deliveryTotals = [
  ["queued", "Queued", "not yet delivered, retrying, or held by quiet hours"],
  ["sent", "Sent", "a provider accepted it"],
  ["failed", "Failed", "no device could take it"],
  ["skipped", "Skipped", "the recipient opted out"],
  ["expired", "Expired", "its lifetime ended before it was sent"],
  ["ambiguous", "Ambiguous", "a provider's answer was lost: maybe delivered"],
  ["noDevices", "No devices", "the recipient's devices went before its turn"],
  ["canceled", "Canceled", "canceled before it was sent"],
];
const attemptTotals = [
  ["accepted", "Accepted", "the provider took it"],
  ["invalidTokens", "Invalid tokens", "the token is dead; the device was deleted"],
  ["rejected", "Rejected", "the provider refused it for another reason"],
  ["ambiguousAttempts", "Ambiguous", "an answer was lost at least once: maybe delivered"],
];

// The audience the expansion passed: written plus each reason a recipient
// was not written adds up to it (D155).
const audienceCounts = [
  ["written", "Written", "a delivery was written: counted by status above"],
  ["noDevice", "Not written: no device", "the recipient had no registered device"],
  ["filteredOut", "Not written: filtered out", "it had devices; the filter selected none"],
  ["malformedTokens", "Not written: malformed tokens", "every selected device's token is malformed"],
  ["duplicateTokens", "Not written: duplicate token", "its token was another recipient's target: sent once"],
  ["expanded", "Audience passed", "written plus not written, so far"],
];

function totalsTable(rows, totals, head, caption) {
  return table([head, { label: "Count", num: true }, "Meaning"],
    rows.map(([key, word, meaning]) =>
      el("tr", { "data-total": key }, el("th", { scope: "row" }, word), el("td", { className: "num count" }, totals[key]), el("td", {}, meaning))),
    caption);
}

// --- views

// Each view renders into the container and may return a function that
// stops it (the backlog's refresh).
const views = {
  async notifications(view, _arg, params) {
    const q = new URLSearchParams({ limit: "25" });
    const wanted = params.get("status") || "";
    if (wanted) q.set("status", wanted);
    if (params.get("cursor")) q.set("cursor", params.get("cursor"));
    const page = await api("GET", `/v1/notifications?${q}`);
    const status = el("select", { id: "filter-status", name: "status" },
      [["", "any"], ["failed", "with a failed delivery"], ["ambiguous", "with an ambiguous delivery"], ["no_devices", "with a recipient without devices"],
        ["expired", "with an expired delivery"], ["pending", "still being delivered"], ["done", "done"], ["sent", "with a sent delivery"],
        ["skipped", "with a skipped delivery"], ["canceled", "with a canceled delivery"]]
        .map(([v, label]) => el("option", { value: v, selected: v === wanted }, label)));
    const form = el("form", { id: "filter-form" }, el("label", { for: "filter-status" }, "Show notifications"), status, el("button", { type: "submit" }, "Filter"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      location.hash = `#/notifications${status.value ? `?status=${encodeURIComponent(status.value)}` : ""}`;
    });
    const rows = page.notifications.map((n) => {
      const bad = needsAttention(n.counts);
      return el("tr", { "data-notification-id": n.id, "data-attention": String(bad), className: bad ? "attention" : "" },
        el("td", { className: "num" }, el("a", { href: `#/notification/${n.id}` }, String(n.id))),
        el("td", {}, n.title || n.type || "—"),
        el("td", { className: "state" }, n.status === "pending" ? "still being delivered" : "done"),
        el("td", { className: "outcomes" }, bad ? el("strong", {}, "Needs a look: ") : null, countsText(n.counts)),
        el("td", {}, fmtTime(n.createdAt)), el("td", {}, n.category || "—"));
    });
    const next = page.nextCursor
      ? el("p", {}, el("a", { href: `#/notifications?${new URLSearchParams({ ...(wanted ? { status: wanted } : {}), cursor: page.nextCursor })}` }, "Older notifications"))
      : null;
    fill(view,
      el("h1", {}, "Notifications, newest first"), form,
      rows.length ? table(["Id", "Title", "Status", "Deliveries", "Created", "Category"], rows) : el("p", { id: "no-notifications" }, wanted ? "No notification matches." : "No notification."),
      next,
    );
  },

  async recipient(view, arg, params) {
    const input = el("input", { id: "recipient-input", name: "recipient", value: arg || "", required: true, autocomplete: "off", placeholder: "u_8831" });
    const form = el("form", { id: "recipient-form", role: "search" },
      el("label", { for: "recipient-input" }, "Recipient id"), input, el("button", { type: "submit" }, "Show activity"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      location.hash = `#/recipient/${encodeURIComponent(input.value.trim())}`;
    });
    if (!arg) {
      fill(view, el("h1", {}, "A recipient's activity"), form);
      input.focus();
      return;
    }
    const enc = encodeURIComponent(arg);
    const q = new URLSearchParams({ limit: "50" });
    if (params.get("cursor")) q.set("cursor", params.get("cursor"));
    const [page, devices] = await Promise.all([
      api("GET", `/v1/recipients/${enc}/deliveries?${q}`),
      api("GET", `/v1/recipients/${enc}/devices`),
    ]);
    const devRows = devices.devices.map((d) =>
      el("tr", { "data-device-id": d.id }, el("td", { className: "num" }, d.id), el("td", {}, d.transport), el("td", { className: "mono" }, d.token),
        el("td", {}, d.platform || "—"), el("td", {}, d.session || "—"), el("td", {}, fmtTime(d.registeredAt))));
    fill(view,
      el("h1", {}, "Activity of ", el("span", { className: "mono", id: "recipient-name" }, arg)),
      form,
      page.deliveries.length ? summaryOf(page.deliveries) : null,
      el("h2", {}, "Devices registered now"),
      devRows.length ? table(["Device", "Transport", "Token (masked)", "Platform", "Session", "Registered"], devRows) : el("p", {}, "No device registered."),
      el("h2", {}, "Deliveries, newest first"),
      page.deliveries.length ? page.deliveries.map((d) => deliveryCard(d)) : el("p", { id: "no-deliveries" }, "No delivery to this recipient."),
      page.nextCursor ? el("p", {}, el("a", { href: `#/recipient/${enc}?cursor=${page.nextCursor}` }, "Older deliveries")) : null,
    );
  },

  async notification(view, arg, params) {
    const id = Number.parseInt(arg, 10);
    const wanted = params.get("status") || "";
    const q = new URLSearchParams({ limit: String(DELIVERY_PAGE) });
    if (wanted) q.set("status", wanted);
    if (params.get("cursor")) q.set("cursor", params.get("cursor"));
    const [n, page] = await Promise.all([api("GET", `/v1/notifications/${id}`), api("GET", `/v1/notifications/${id}/deliveries?${q}`)]);
    const rowsAt = (st) => `#/notification/${id}${st ? `?status=${st}` : ""}`;
    // The statuses with deliveries; all of them when none has any.
    const shown = deliveryStatuses.filter((st) => n.counts[st] > 0);
    const counts = (shown.length ? shown : deliveryStatuses).map((st) =>
      el("tr", { "data-status": st, className: badStatuses.includes(st) && n.counts[st] > 0 ? "attention" : "" },
        el("td", {}, statusWords[st]), el("td", { className: "num count" }, n.counts[st]),
        el("td", {}, n.counts[st] > 0 ? el("a", { href: rowsAt(st) }, "show") : "")));
    const result = el("p", { id: "cancel-result", role: "status" }, notice);
    notice = "";
    const confirm = el("button", { type: "button", id: "cancel-confirm", className: "danger", hidden: true }, "Yes, cancel every pending delivery");
    const ask = el("button", { type: "button", id: "cancel" }, "Cancel this notification…");
    ask.addEventListener("click", () => {
      confirm.hidden = false;
      confirm.focus();
    });
    confirm.addEventListener("click", async () => {
      confirm.disabled = true;
      try {
        const r = await api("POST", `/v1/notifications/${id}/cancel`);
        notice = `Canceled ${r.canceled} pending deliver${r.canceled === 1 ? "y" : "ies"}; ${r.inFlight} send(s) were already with a provider.`;
        await route();
      } catch (err) {
        confirm.disabled = false;
        if (!handleAuth(err)) showError(err);
      }
    });
    const pending = n.counts.pending || 0;
    const total = deliveryStatuses.reduce((sum, st) => sum + n.counts[st], 0);
    const rowsStatus = el("select", { id: "rows-status", name: "status" },
      ["", ...deliveryStatuses].map((st) => el("option", { value: st, selected: st === wanted }, st ? statusWords[st] : "every status")));
    const rowsForm = el("form", { id: "rows-form" }, el("label", { for: "rows-status" }, "Deliveries to show"), rowsStatus, el("button", { type: "submit" }, "Show"));
    rowsForm.addEventListener("submit", (e) => {
      e.preventDefault();
      location.hash = rowsAt(rowsStatus.value);
    });
    const more = page.nextCursor
      ? el("p", {}, el("a", { id: "deliveries-next", href: `#/notification/${id}?${new URLSearchParams({ ...(wanted ? { status: wanted } : {}), cursor: page.nextCursor })}` }, "Next deliveries"))
      : null;
    fill(view,
      el("h1", {}, `Notification ${n.id}: `, el("span", {}, n.title || n.type || "(no title)")),
      el("p", { className: `summary${needsAttention(n.counts) ? " bad" : ""}`, id: "outcome-summary" },
        el("strong", {}, n.status === "pending" ? "Still being delivered: " : "Done: "),
        `${plural(total, "recipient", "recipients")} — ${countsText(n.counts)}.`,
        n.ambiguousAttempts ? ` ${plural(n.ambiguousAttempts, "device attempt", "device attempts")} lost an answer (maybe delivered).` : ""),
      page.deliveries.length ? summaryOf(page.deliveries) : null,
      el("div", { className: "totals" },
        el("section", { "aria-labelledby": "counts-title" },
          el("h2", { id: "counts-title" }, "Deliveries by status"),
          table(["Status", { label: "Deliveries", num: true }, "Rows"], counts, shown.length ? "Statuses with no delivery are left out." : null)),
        el("section", { "aria-labelledby": "facts-title" },
          el("h2", { id: "facts-title" }, "Details"),
          el("dl", { className: "facts" },
            el("dt", {}, "Type"), el("dd", {}, n.type || "—"),
            el("dt", {}, "Body"), el("dd", {}, n.body || "—"),
            el("dt", {}, "Category"), el("dd", {}, n.category || "—"),
            el("dt", {}, "Link"), el("dd", { className: "mono" }, n.link || "—"),
            el("dt", {}, "Ambiguity policy"), el("dd", {}, n.ambiguity),
            el("dt", {}, "Created"), el("dd", {}, fmtTime(n.createdAt)),
            el("dt", {}, "Scheduled"), el("dd", {}, fmtTime(n.scheduledAt)),
            el("dt", {}, "Expires"), el("dd", {}, fmtTime(n.expiresAt)),
            el("dt", {}, "Ambiguous attempts"), el("dd", { id: "ambiguous-attempts" }, String(n.ambiguousAttempts))))),
      pending > 0 ? el("div", {}, ask, " ", confirm) : el("p", { className: "hint" }, "Nothing is pending: there is nothing to cancel."),
      result,
      el("h2", {}, wanted ? `${statusWords[wanted]} deliveries, in delivery order` : "Deliveries, in delivery order"),
      rowsForm,
      page.deliveries.length
        ? page.deliveries.map((d) => deliveryCard(d, { showNotification: false, showRecipient: true }))
        : el("p", { id: "no-deliveries" }, page.nextCursor ? "None on this stretch of the list." : wanted ? `No ${statusWords[wanted].toLowerCase()} delivery.` : "No delivery."),
      more,
    );
  },

  async campaigns(view, _arg, params) {
    const q = new URLSearchParams({ limit: String(CAMPAIGN_PAGE) });
    const wanted = params.get("status") || "";
    if (wanted) q.set("status", wanted);
    if (params.get("cursor")) q.set("cursor", params.get("cursor"));
    const page = await api("GET", `/v1/campaigns?${q}`);
    const status = el("select", { id: "campaign-filter-status", name: "status" },
      ["", ...campaignStatuses].map((s) => el("option", { value: s, selected: s === wanted }, s || "any")));
    const form = el("form", { id: "campaign-filter" }, el("label", { for: "campaign-filter-status" }, "Status"), status,
      el("button", { type: "submit" }, "Filter"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      location.hash = `#/campaigns${status.value ? `?status=${encodeURIComponent(status.value)}` : ""}`;
    });
    const rows = page.campaigns.map((c) =>
      el("tr", { "data-campaign-id": c.id },
        el("td", { className: "num" }, el("a", { href: `#/campaign/${c.id}` }, String(c.id))),
        el("td", { className: "name" }, c.name || "(no name)"),
        el("td", { className: "status", "data-status": c.status }, c.status),
        el("td", {}, audienceText(c)),
        el("td", {}, fmtTime(c.createdAt)),
        el("td", {}, c.startedAt ? `started ${fmtTime(c.startedAt)}` : c.startAt ? `starts ${fmtTime(c.startAt)}` : "—"),
        el("td", { className: "num" }, c.written)));
    const next = page.nextCursor
      ? el("p", {}, el("a", { id: "campaigns-older", href: `#/campaigns?${new URLSearchParams({ ...(wanted ? { status: wanted } : {}), cursor: page.nextCursor })}` }, "Older campaigns"))
      : null;
    fill(view,
      el("h1", {}, "Campaigns, newest first"), form,
      rows.length
        ? table(["Id", "Name", "Status", "Audience", "Created", "Start", { label: "Deliveries written", num: true }], rows)
        : el("p", { id: "no-campaigns" }, wanted ? `No campaign is ${wanted}.` : "No campaign."),
      next,
    );
  },

  async campaign(view, arg) {
    const id = Number.parseInt(arg, 10);
    let said = ""; // what the last action did, for the next drawing
    // draw reads the campaign and draws its page; an action draws it again,
    // whether the server took it or refused it, so the page shows the
    // campaign as it is now.
    const draw = async () => {
      const c = await api("GET", `/v1/campaigns/${id}`);
      const here = parseHash();
      if (here.name !== "campaign" || here.arg !== arg) return; // the operator went elsewhere meanwhile
      const t = c.totals;
      const result = el("p", { id: "campaign-result", role: "status", tabIndex: -1 }, said);
      const actions = campaignActions.filter((a) => a.offered(c)).map((a) => {
        const ask = el("button", { type: "button", id: `campaign-${a.op}`, className: a.danger ? "danger" : "" }, a.label);
        const yes = el("button", { type: "button", id: `campaign-${a.op}-confirm`, className: a.danger ? "danger" : "" }, a.yes);
        const no = el("button", { type: "button" }, "No, keep it as it is");
        const box = el("div", { className: "confirm", id: `campaign-${a.op}-ask`, role: "group", "aria-label": `Confirm: ${a.yes}`, hidden: true },
          el("p", {}, a.ask(c)), yes, " ", no);
        ask.addEventListener("click", () => {
          for (const other of view.querySelectorAll(".confirm")) other.hidden = true;
          box.hidden = false;
          yes.focus();
        });
        no.addEventListener("click", () => {
          box.hidden = true;
          ask.focus();
        });
        yes.addEventListener("click", async () => {
          yes.disabled = true;
          clearError();
          let refused = null;
          try {
            const r = await api("POST", `/v1/campaigns/${id}/${a.op}`);
            said = `${a.done}: campaign ${id} is now ${r.status}.`;
          } catch (err) {
            if (handleAuth(err)) return;
            refused = err;
            said = `Not done: the server refused to ${a.op} it (${err.problem?.code || err.status}). The campaign below is as read again just now.`;
          }
          try {
            await draw();
          } catch (err) {
            if (!handleAuth(err)) showError(err);
            return;
          }
          if (refused) showError(refused);
          $("campaign-result")?.focus();
        });
        return el("div", { className: "action" }, ask, box);
      });
      const refresh = el("button", { type: "button", id: "campaign-refresh" }, "Read again");
      refresh.addEventListener("click", async () => {
        clearError();
        said = "";
        try {
          await draw();
        } catch (err) {
          if (!handleAuth(err)) showError(err);
        }
      });
      fill(view,
        el("h1", {}, `Campaign ${c.id}: `, el("span", { id: "campaign-name" }, c.name || "(no name)")),
        el("p", { className: "summary", id: "campaign-status", "data-status": c.status },
          el("strong", {}, `Status: ${c.status}`), ` — ${campaignStatusWords[c.status] || ""}.`),
        el("div", { className: "actions" }, actions, refresh),
        result,
        el("div", { className: "totals" },
          el("section", { "aria-labelledby": "totals-deliveries" },
            el("h2", { id: "totals-deliveries" }, "Deliveries by status"),
            totalsTable(deliveryTotals, t, "Deliveries", "One per recipient reached, as tallied with the rows when this page was read.")),
          el("section", { "aria-labelledby": "totals-attempts" },
            el("h2", { id: "totals-attempts" }, "Device attempts by what the provider said"),
            totalsTable(attemptTotals, t, "Attempts", "One per device a delivery was sent to.")),
          el("section", { "aria-labelledby": "totals-audience", id: "campaign-audience-counts" },
            el("h2", { id: "totals-audience" }, "Recipients written and not written"),
            totalsTable(audienceCounts, { written: c.written, expanded: c.expanded, ...c.notWritten }, "Recipients",
              c.status === "completed"
                ? "Every recipient of the audience, each counted once by the batch that passed it."
                : "The recipients the expansion has passed so far, each counted once by the batch that passed it."))),
        el("h2", {}, "Details"),
        el("dl", { className: "facts", id: "campaign-facts" },
          el("dt", {}, "Message"), el("dd", { id: "campaign-message" }, [c.message.title, c.message.body].filter(Boolean).join(" — ") || "—"),
          el("dt", {}, "Type / category"), el("dd", {}, `${c.message.type || "—"} / ${c.category || "—"}`),
          el("dt", {}, "Audience"), el("dd", { id: "campaign-audience", "data-audience": c.audience }, audienceText(c)),
          el("dt", {}, "Created"), el("dd", {}, fmtTime(c.createdAt)),
          el("dt", {}, "Scheduled start"), el("dd", { id: "campaign-start-at" }, c.startAt ? fmtTime(c.startAt) : "not scheduled"),
          el("dt", {}, "Started"), el("dd", { id: "campaign-started" }, c.startedAt ? fmtTime(c.startedAt) : "not yet"),
          el("dt", {}, "Finished"), el("dd", {}, c.finishedAt ? fmtTime(c.finishedAt) : "not yet"),
          el("dt", {}, "Pacing"), el("dd", { id: "campaign-pacing" }, pacingText(c)),
          el("dt", {}, "Cursor (last recipient written)"), el("dd", { className: "mono", id: "campaign-cursor" }, c.cursor || "none yet"),
          el("dt", {}, "Deliveries written"), el("dd", { id: "campaign-written" }, String(c.written)),
          el("dt", {}, "Tries since the last batch"), el("dd", { id: "campaign-tries" }, String(c.tries)),
          el("dt", {}, "Last error"), el("dd", { id: "campaign-last-error" }, c.lastError || "none"),
          el("dt", {}, "Malformed tokens left out"), el("dd", { id: "campaign-malformed" }, String(c.malformedTokens)),
          el("dt", {}, "Duplicate tokens sent once"), el("dd", { id: "campaign-duplicate" }, String(c.duplicateTokens)),
          el("dt", {}, "Notification"),
          el("dd", {}, c.notificationId
            ? el("a", { id: "campaign-notification", href: `#/notification/${c.notificationId}` }, `notification ${c.notificationId}: every delivery and device attempt`)
            : "none until it starts")),
        el("p", {}, el("a", { href: "#/campaigns" }, "All campaigns")),
      );
    };
    await draw();
  },

  async backlog(view) {
    let timer = 0;
    let stopped = false;
    const draw = async () => {
      const a = await api("GET", "/v1/activity");
      if (stopped) return;
      const b = a.backlog;
      const due = b.due >= b.dueCap ? `at least ${b.due}` : String(b.due);
      const facts = el("dl", { className: "facts", id: "backlog-facts" },
        el("dt", {}, "Due now"), el("dd", { id: "due" }, due),
        el("dt", {}, "Oldest due for"), el("dd", { id: "oldest" }, fmtAge(b.oldestDueSeconds)),
        el("dt", {}, "Read at"), el("dd", {}, fmtTime(a.at)));
      const parts = [el("h1", {}, "Backlog and recent sends"), facts];
      const r = a.recent;
      if (!r) {
        parts.push(el("p", {}, "This server counts no provider calls (it runs without metrics)."));
      } else {
        parts.push(
          el("p", { className: "hint", id: "scope-note" },
            `Provider calls made by this server process over the last ${r.windowSeconds / 60} minutes (since ${fmtTime(r.since)}), ` +
            `in ${r.bucketSeconds}-second buckets. Calls made by other processes (oncepush work) are not counted here; see the Prometheus metrics for all of them.`),
          el("dl", { className: "facts" },
            el("dt", {}, "Calls"), el("dd", { id: "calls" }, String(r.calls)),
            el("dt", {}, "Answers lost (ambiguous)"), el("dd", { id: "ambiguous" }, `${r.ambiguous} (${pct(r.ambiguousRate)} of calls)`)),
          chart(r),
          table(
            ["Transport", { label: "Calls", num: true }, { label: "Sends/s", num: true }, { label: "Accepted", num: true }, { label: "Retry", num: true },
              { label: "Rejected", num: true }, { label: "Invalid token", num: true }, { label: "No answer", num: true }, { label: "Ambiguous", num: true }],
            r.transports.map((t) =>
              el("tr", { "data-transport": t.transport }, el("td", {}, t.transport), el("td", { className: "num calls" }, t.calls),
                el("td", { className: "num" }, t.sendsPerSecond.toFixed(2)), el("td", { className: "num accepted" }, t.outcomes.accepted),
                el("td", { className: "num" }, t.outcomes.retry), el("td", { className: "num" }, t.outcomes.rejected),
                el("td", { className: "num" }, t.outcomes.invalid_token), el("td", { className: "num" }, t.outcomes.maybe_sent),
                el("td", { className: "num" }, t.ambiguous))),
            "Outcomes by transport over the window",
          ),
        );
      }
      parts.push(el("p", { className: "hint" }, `Refreshes every ${REFRESH_MS / 1000} s while this view is open.`));
      fill(view, parts);
      view.dataset.loaded = String(Number(view.dataset.loaded || 0) + 1);
    };
    const loop = async () => {
      try {
        await draw();
        clearError();
      } catch (err) {
        if (handleAuth(err)) return;
        showError(err);
      }
      if (!stopped) timer = setTimeout(loop, REFRESH_MS);
    };
    await draw();
    timer = setTimeout(loop, REFRESH_MS);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  },

  async device(view) {
    const transport = el("select", { id: "device-transport", name: "transport" },
      ["fcm", "apns", "webpush", "rustore"].map((t) => el("option", { value: t }, t)));
    const token = el("textarea", { id: "device-token", name: "token", required: true, spellcheck: false, autocomplete: "off",
      placeholder: "the device token, or a Web Push subscription as JSON" });
    const out = el("div", { id: "device-result" });
    const form = el("form", { id: "device-form", role: "search" },
      el("label", { for: "device-transport" }, "Transport"), transport,
      el("label", { for: "device-token" }, "Token"), token,
      el("button", { type: "submit" }, "Look up"));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      clearError();
      out.replaceChildren();
      let tok = token.value.trim();
      if (transport.value === "webpush" && tok.startsWith("{")) {
        try {
          tok = JSON.parse(tok);
        } catch {
          // sent as a string; the server says what is wrong with it
        }
      }
      try {
        const d = await api("POST", "/v1/devices/lookup", { transport: transport.value, token: tok });
        fill(out,
          el("h2", {}, `Device ${d.id}`),
          el("dl", { className: "facts" },
            el("dt", {}, "Recipient"), el("dd", {}, el("a", { href: `#/recipient/${encodeURIComponent(d.recipient)}`, id: "device-recipient" }, d.recipient)),
            el("dt", {}, "Transport"), el("dd", {}, d.transport),
            el("dt", {}, "Token (masked)"), el("dd", { className: "mono", id: "device-masked" }, d.token),
            el("dt", {}, "Platform"), el("dd", {}, d.platform || "—"),
            el("dt", {}, "Session"), el("dd", {}, d.session || "—"),
            el("dt", {}, "Locale / time zone"), el("dd", {}, `${d.locale || "—"} / ${d.timeZone || "—"}`),
            el("dt", {}, "First registered"), el("dd", {}, fmtTime(d.createdAt)),
            el("dt", {}, "Last registered"), el("dd", {}, fmtTime(d.registeredAt))));
      } catch (err) {
        if (!handleAuth(err)) showError(err);
      } finally {
        token.value = ""; // the token is a secret: do not leave it on screen
      }
    });
    fill(view, el("h1", {}, "Find a device by its token"), form,
      el("p", { className: "hint" }, "The token is sent in the request body, never in a URL, and shown back masked."), out);
    transport.focus();
  },
};

// --- routing and the key

let stop = null;
// notice is a message for the next rendering of a view (what a cancel did).
let notice = "";

function parseHash() {
  const h = location.hash.replace(/^#\/?/, "");
  const [pathPart, query = ""] = h.split("?");
  const [name, ...rest] = pathPart.split("/");
  return { name: name || "notifications", arg: rest.length ? decodeURIComponent(rest.join("/")) : "", params: new URLSearchParams(query) };
}

// handleAuth: a refused key is forgotten and the login shown, with no data.
function handleAuth(err) {
  if (err.status !== 401) return false;
  sessionStorage.removeItem(KEY);
  showLogin();
  showError(err);
  return true;
}

function showLogin() {
  if (stop) stop();
  stop = null;
  $("view").replaceChildren();
  $("nav").hidden = true;
  $("login").hidden = false;
  $("login-key").value = "";
  $("login-key").focus();
}

async function route() {
  if (!sessionStorage.getItem(KEY)) {
    showLogin();
    return;
  }
  $("login").hidden = true;
  $("nav").hidden = false;
  if (stop) stop();
  stop = null;
  const { name, arg, params } = parseHash();
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === `#/${name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const view = $("view");
  const render = views[name];
  clearError();
  if (!render) {
    fill(view, el("h1", {}, "No such view"), el("p", {}, el("a", { href: "#/notifications" }, "Go to the notifications")));
    return;
  }
  fill(view, el("p", { className: "hint" }, "Loading…"));
  view.dataset.view = name;
  try {
    stop = (await render(view, arg, params)) || null;
    document.title = `${view.querySelector("h1")?.textContent || name} · oncepush console`;
  } catch (err) {
    fill(view);
    if (!handleAuth(err)) showError(err);
  }
}

async function login(e) {
  e.preventDefault();
  clearError();
  const key = $("login-key").value.trim();
  // One read checks the key and its read scope before it is kept.
  try {
    await api("GET", "/v1/notifications?limit=1", undefined, key);
  } catch (err) {
    $("login-key").value = "";
    showError(err);
    $("login-key").focus();
    return;
  }
  sessionStorage.setItem(KEY, key);
  $("login-key").value = "";
  await route();
  $("main").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", login);
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    clearError();
    showLogin();
  });
  window.addEventListener("hashchange", () => route().then(() => $("main").focus()));
  route();
});

// chart draws calls per bucket for each transport, one labelled row each:
// a row per transport rather than colours, so it reads in black and white.
function chart(r) {
  const rows = r.transports;
  const W = 600, label = 70, rowH = 36, gap = 8, n = r.windowSeconds / r.bucketSeconds;
  const H = rows.length * (rowH + gap) + 18;
  const max = Math.max(1, ...rows.flatMap((t) => t.buckets));
  const bw = (W - label) / n;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-labelledby": "chart-title" },
    el("title", { id: "chart-title" }, `Provider calls per ${r.bucketSeconds} s by transport, last ${r.windowSeconds / 60} minutes; the highest bar is ${max} calls.`));
  rows.forEach((t, i) => {
    const y0 = i * (rowH + gap);
    const g = el("g", { "data-transport": t.transport });
    g.append(el("text", { x: 0, y: y0 + rowH / 2 + 4 }, `${t.transport} ${t.calls}`));
    g.append(el("line", { x1: label, x2: W, y1: y0 + rowH, y2: y0 + rowH, class: "axis" }));
    t.buckets.forEach((c, j) => {
      if (!c) return;
      const h = (c / max) * rowH;
      g.append(el("rect", { class: "bar", x: label + j * bw + 0.5, y: y0 + rowH - h, width: Math.max(1, bw - 1), height: h },
        el("title", {}, `${t.transport}: ${c} calls`)));
    });
    svg.append(g);
  });
  svg.append(el("text", { x: label, y: H - 4 }, `−${r.windowSeconds / 60} min`));
  svg.append(el("text", { x: W - 24, y: H - 4 }, "now"));
  return el("figure", { className: "chart", id: "chart" }, svg,
    el("figcaption", { className: "hint" }, `Calls per ${r.bucketSeconds}-second bucket, oldest on the left; highest bar: ${max}.`));
}
