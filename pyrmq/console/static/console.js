/* The console's single-page app: hash routes (#/cluster, #/topics, #/topic/NAME, #/groups, #/group/NAME,
   #/messages, #/charts), each page a function that calls the JSON API under /api/ and builds its
   DOM with el() (text nodes only: nothing a broker returns is ever parsed as HTML). */
"use strict";

const view = () => document.getElementById("view");
let pageTimer = null;   // the live page's poll; stopped when the page changes
let chartGeneration = 0;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null && value !== false) node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function table(headers, rows, attrs) {
  return el("table", attrs, el("thead", {}, el("tr", {}, headers.map(h => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function num(value) { return el("td", { class: "num" }, value); }

function status(text, kind) {
  const node = document.getElementById("status");
  node.textContent = text || "";
  node.className = kind || "";
}

async function api(path, params) {
  const query = params ? "?" + new URLSearchParams(params).toString() : "";
  const response = await fetch("/api/" + path + query, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function post(path, body) {
  const response = await fetch("/api/" + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function showError(where, error) {
  where.replaceChildren(el("p", { class: "error" }, String(error.message || error)));
}

function time(ms) { return ms > 0 ? new Date(Number(ms)).toLocaleString() : "-"; }

/* --- cluster ------------------------------------------------------------------------------- */

async function pageCluster(root) {
  const data = await api("cluster");
  const rows = data.brokers.map(b => {
    const info = b.info || {};
    const ha = b.role === "MASTER"
      ? `connections ${info.haConnectionCount ?? "-"}, behind ${info.slaveFallBehindMuch ?? "-"} B`
      : `master ${info.masterAddr || "-"}, connected ${info.haConnected ?? "-"}, behind ${info.slaveFallBehindMuch ?? "-"} B`;
    return el("tr", { "data-broker": b.brokerName + ":" + b.brokerId },
      el("td", {}, b.cluster), el("td", {}, b.brokerName), num(b.brokerId), el("td", {}, b.role),
      el("td", {}, b.addr), el("td", {}, info.brokerVersionDesc || "-"), num(b.putTps ?? "-"), num(b.getTps ?? "-"),
      num(info.msgPutTotalTodayNow ?? "-"), num(info.msgGetTotalTodayNow ?? "-"),
      num(info.commitLogDiskRatio ?? "-"), el("td", {}, b.error ? el("span", { class: "error" }, b.error) : ha));
  });
  root.replaceChildren(el("h2", {}, "Cluster"),
    table(["Cluster", "Broker", "Id", "Role", "Address", "Version", "Put TPS", "Get TPS", "Put today",
      "Get today", "Disk ratio", "Replication"], rows, { id: "brokers" }));
}

/* --- topics -------------------------------------------------------------------------------- */

async function pageTopics(root) {
  const result = el("div", { id: "topic-result" });
  const form = el("form", { id: "create-topic" },
    el("label", {}, "Topic ", el("input", { name: "topic", required: true, pattern: "[%|a-zA-Z0-9_-]+", maxlength: 127 })),
    el("label", {}, "Write queues ", el("input", { name: "writeQueueNums", type: "number", min: 1, max: 1024, value: 4 })),
    el("label", {}, "Read queues ", el("input", { name: "readQueueNums", type: "number", min: 1, max: 1024, value: 4 })),
    el("button", { type: "submit" }, "Create / update"));
  form.addEventListener("submit", async event => {
    event.preventDefault();
    const f = new FormData(form);
    try {
      const saved = await post("topics", { topic: f.get("topic"), writeQueueNums: Number(f.get("writeQueueNums")),
        readQueueNums: Number(f.get("readQueueNums")) });
      result.replaceChildren(el("p", { class: "ok" }, `Saved ${saved.topic} on ${saved.brokers.join(", ")}`));
      await fill();
    } catch (error) { showError(result, error); }
  });
  const showSystem = el("input", { type: "checkbox", id: "show-system" });
  const list = el("div", {});
  showSystem.addEventListener("change", () => fill());
  root.replaceChildren(el("h2", {}, "Topics"), form, result,
    el("label", {}, showSystem, " show system, retry and DLQ topics"), list);

  async function fill() {
    const data = await api("topics");
    const rows = data.topics.filter(t => showSystem.checked || !t.system).map(t => {
      const queues = el("input", { type: "number", min: 1, max: 1024, value: t.writeQueueNums });
      return el("tr", { "data-topic": t.topic },
        el("td", {}, el("a", { href: "#/topic/" + encodeURIComponent(t.topic) }, t.topic)),
        el("td", {}, t.brokers.join(", ")), num(t.perm), num(t.readQueueNums),
        num(t.writeQueueNums), num(t.maxOffset), num(t.messages),
        el("td", {}, queues, " ",
          el("button", { class: "secondary", onclick: () => changeQueues(t, Number(queues.value)) }, "Set queues"), " ",
          el("button", { class: "danger", onclick: () => drainAndDelete(t.topic) }, "Delete")));
    });
    list.replaceChildren(table(["Topic", "Brokers", "Perm", "Read queues", "Write queues", "Max offset",
      "Messages", "Actions"], rows, { id: "topics" }));
  }

  async function changeQueues(t, count) {
    try {
      await post("topics", { topic: t.topic, writeQueueNums: count, readQueueNums: count, perm: t.perm });
      result.replaceChildren(el("p", { class: "ok" }, `${t.topic} now has ${count} queues`));
      await fill();
    } catch (error) { showError(result, error); }
  }

  async function drainAndDelete(topic) {
    if (!window.confirm(`Make ${topic} read-only and delete it once every group has consumed it?`)) return;
    try {
      const answer = await post("topics/delete", { topic });
      if (answer.deleted) {
        result.replaceChildren(el("p", { class: "ok" }, `Deleted ${topic}`));
      } else {
        result.replaceChildren(el("p", { class: "error" },
          `${topic} is read-only now; not deleted yet: these groups have messages left`),
          table(["Group", "Broker", "Queue", "Consumer offset", "Max offset", "Left"], answer.remaining.map(r =>
            el("tr", {}, el("td", {}, r.group), el("td", {}, r.brokerName), num(r.queueId), num(r.consumerOffset),
              num(r.brokerOffset), num(r.lag))), { id: "remaining" }));
      }
      await fill();
    } catch (error) { showError(result, error); }
  }
  await fill();
}

async function pageTopic(root, name) {
  const t = await api("topic", { topic: name });
  root.replaceChildren(el("h2", {}, "Topic ", t.topic),
    el("h3", {}, "Queues"),
    table(["Broker", "Queue", "Min offset", "Max offset", "Last stored"], t.queues.map(q =>
      el("tr", { "data-queue": `${q.brokerName}/${q.queueId}` }, el("td", {}, q.brokerName), num(q.queueId),
        num(q.minOffset), num(q.maxOffset), el("td", {}, time(q.lastUpdateTimestamp)))), { id: "topic-queues" }),
    el("h3", {}, "Consumer groups"),
    t.consumers.length
      ? table(["Group", "Broker", "Lag"], t.consumers.map(c => el("tr", { "data-group": c.group },
        el("td", {}, el("a", { href: "#/group/" + encodeURIComponent(c.group) }, c.group)),
        el("td", {}, c.brokerName), num(c.lag))), { id: "topic-consumers" })
      : el("p", { class: "muted", id: "topic-consumers" }, "No group consumes this topic."));
}

/* --- consumer groups ----------------------------------------------------------------------- */

async function pageGroups(root) {
  const data = await api("groups");
  const showSystem = el("input", { type: "checkbox" });
  const list = el("div", {});
  const fill = () => list.replaceChildren(table(["Group", "Brokers", "Members", "Lag", "Consume TPS"],
    data.groups.filter(g => showSystem.checked || !g.system).map(g => el("tr", { "data-group": g.group },
      el("td", {}, el("a", { href: "#/group/" + encodeURIComponent(g.group) }, g.group)),
      el("td", {}, g.brokers.join(", ")), num(g.members), num(g.lag), num(g.consumeTps.toFixed(2))))),
  { id: "groups" });
  showSystem.addEventListener("change", fill);
  fill();
  root.replaceChildren(el("h2", {}, "Consumer groups"), el("label", {}, showSystem, " show system groups"), list);
}

async function pageGroup(root, name) {
  const g = await api("group", { group: name });
  const result = el("div", { id: "group-result" });
  const topics = [...new Set(g.queues.map(q => q.topic))].filter(t => !t.startsWith("%RETRY%"));
  const when = el("input", { type: "datetime-local", name: "when", step: 1 });
  const topicSelect = el("select", { name: "topic" }, topics.map(t => el("option", { value: t }, t)));
  const reset = el("form", { id: "reset-offset" }, el("label", {}, "Topic ", topicSelect),
    el("label", {}, "Time ", when), el("span", { class: "muted" }, " (empty: the queue ends) "),
    el("button", { type: "submit" }, "Reset offset by time"));
  reset.addEventListener("submit", async event => {
    event.preventDefault();
    const timestamp = when.value ? new Date(when.value).getTime() : -1;
    try {
      const answer = await post("groups/reset-offset", { group: g.group, topic: topicSelect.value, timestamp });
      result.replaceChildren(el("p", { class: "ok" }, `Reset ${answer.topic}: ` +
        answer.offsets.map(o => `${o.brokerName}/${o.queueId} → ${o.offset}`).join(", ")));
      await showQueues();
    } catch (error) { showError(result, error); }
  });
  const queues = el("div", {});
  async function showQueues() {
    const fresh = await api("group", { group: name });
    queues.replaceChildren(table(["Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "Last consumed"],
      fresh.queues.map(q => el("tr", { "data-queue": `${q.topic}/${q.brokerName}/${q.queueId}` },
        el("td", {}, q.topic), el("td", {}, q.brokerName), num(q.queueId), num(q.brokerOffset), num(q.consumerOffset),
        num(q.lag), el("td", {}, time(q.lastTimestamp)))), { id: "group-queues" }));
  }
  const dlq = el("div", { id: "dlq" });
  root.replaceChildren(el("h2", {}, "Consumer group ", g.group),
    el("p", {}, `Model ${g.messageModel || "-"} · lag ${g.lag} · consume TPS ${g.consumeTps.toFixed(2)} · `,
      el("span", { id: "retry-count" }, `retry ${g.retryMessages}`), " · ",
      el("span", { id: "dlq-count" }, `dead letters ${g.dlqMessages}`)),
    el("h3", {}, "Members and subscriptions"),
    g.members.length ? [
      table(["Client id", "Address", "Language", "Version"], g.members.map(m => el("tr", {},
        el("td", {}, m.clientId), el("td", {}, m.clientAddr), el("td", {}, m.language), num(m.version))), { id: "members" }),
      table(["Topic", "Expression"], Object.entries(g.subscriptions).map(([t, s]) => el("tr", {}, el("td", {}, t), el("td", {}, s))))]
      : el("p", { class: "muted", id: "members" }, "No consumer of this group is online (offsets are rewritten directly on reset)."),
    el("h3", {}, "Queues"), reset, result, queues,
    el("h3", {}, "Dead letters"), el("button", { class: "secondary", id: "show-dlq", onclick: showDlq }, "List dead letters"), dlq);
  await showQueues();

  async function showDlq() {
    try {
      const answer = await api("dlq", { group: g.group });
      dlq.replaceChildren(messageList(answer.messages, m => el("button", { class: "secondary",
        onclick: async () => {
          try {
            const sent = await post("dlq/resend", { group: g.group, msgId: m.msgId, brokerName: m.brokerName });
            result.replaceChildren(el("p", { class: "ok", id: "resent" }, `Re-sent ${sent.msgId} to ${sent.topic} as ${sent.newMsgId}`));
          } catch (error) { showError(result, error); }
        } }, "Re-send to ", m.properties.RETRY_TOPIC || "?")));
    } catch (error) { showError(dlq, error); }
  }
}

/* --- messages ------------------------------------------------------------------------------ */

function messageList(messages, action) {
  if (!messages.length) return el("p", { class: "muted" }, "No message found.");
  return el("div", { class: "messages" }, messages.map(m => {
    const body = el("pre", { class: "body" }, m.bodyText ?? m.bodyHex);
    const asHex = el("button", { class: "secondary", onclick: () => { body.textContent = m.bodyHex; } }, "hex");
    const asText = el("button", { class: "secondary", onclick: () => { body.textContent = m.bodyText ?? "(not UTF-8)"; } }, "text");
    return el("div", { class: "panel message", "data-msgid": m.msgId },
      el("div", {}, el("b", {}, m.msgId), ` · ${m.topic} · queue ${m.queueId} · offset ${m.queueOffset} · `,
        `stored ${time(m.storeTimestamp)} · keys ${m.keys || "-"} · tags ${m.tags || "-"} · `,
        `reconsumed ${m.reconsumeTimes} · ${m.bodySize} bytes `, action ? action(m) : null),
      table(["Property", "Value"], Object.entries(m.properties).map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)))),
      el("div", {}, "Body as ", asText, " ", asHex, m.bodyTruncated ? " (first 64 KiB)" : ""), body);
  }));
}

async function pageMessages(root) {
  const modes = { "by-key": ["topic", "key"], "by-unique-key": ["topic", "key"], "by-id": ["msgId"],
    "by-offset": ["topic", "brokerName", "queueId", "offset", "count"], "by-time": ["topic", "begin", "end"] };
  const mode = el("select", { name: "mode" }, Object.keys(modes).map(m => el("option", { value: m }, m.replace(/-/g, " "))));
  const fields = el("span", {});
  const results = el("div", { id: "message-results" });
  const form = el("form", { id: "find-messages" }, el("label", {}, "Find ", mode), fields, el("button", { type: "submit" }, "Search"));
  const draw = () => fields.replaceChildren(...modes[mode.value].map(name => el("label", {}, name + " ",
    el("input", { name, type: ["begin", "end"].includes(name) ? "datetime-local" : "text", step: 1 }))));
  mode.addEventListener("change", draw);
  draw();
  form.addEventListener("submit", async event => {
    event.preventDefault();
    const params = {};
    for (const input of fields.querySelectorAll("input")) {
      if (!input.value) continue;
      params[input.name] = input.type === "datetime-local" ? String(new Date(input.value).getTime()) : input.value;
    }
    try {
      const answer = await api("messages/" + mode.value, params);
      results.replaceChildren(el("p", { class: "muted", id: "message-count" }, `${answer.messages.length} message(s)`),
        messageList(answer.messages));
    } catch (error) { showError(results, error); }
  });
  root.replaceChildren(el("h2", {}, "Messages"), form, results);
}

/* --- live charts --------------------------------------------------------------------------- */

async function pageCharts(root) {
  const tpsCanvas = el("canvas", { id: "tps-chart" }), tpsLegend = el("div", { class: "legend" });
  const lagCanvas = el("canvas", { id: "lag-chart" }), lagLegend = el("div", { class: "legend" });
  const group = el("input", { name: "group", placeholder: "consumer group" });
  root.replaceChildren(el("h2", {}, "Live charts"),
    el("h3", {}, "Messages put and got per second, per master"), tpsCanvas, tpsLegend,
    el("h3", {}, "Lag and consume TPS of ", group), lagCanvas, lagLegend);
  const tps = new window.LineChart(tpsCanvas, tpsLegend);
  const lag = new window.LineChart(lagCanvas, lagLegend);
  let watched = "";
  const last = {};   // broker -> the previous poll's totals: a rate is the difference over the time between

  group.addEventListener("change", () => { watched = group.value.trim(); lag.series.clear(); });
  async function poll() {
    try {
      const data = await api("live", watched ? { group: watched } : undefined);
      for (const [name, b] of Object.entries(data.brokers)) {
        const before = last[name];
        last[name] = { time: data.time, put: b.putTotal, get: b.getTotal };
        if (!before || data.time <= before.time) continue;
        const seconds = (data.time - before.time) / 1000;
        tps.add(name + " put/s", data.time, Math.max(0, Math.round((b.putTotal - before.put) / seconds)));
        tps.add(name + " get/s", data.time, Math.max(0, Math.round((b.getTotal - before.get) / seconds)));
      }
      tps.draw();
      if (data.group) {
        lag.add("lag", data.time, data.group.lag);
        lag.add("consume TPS", data.time, data.group.consumeTps);
      }
      lag.draw();
      status("updated " + new Date(data.time).toLocaleTimeString());
    } catch (error) { status(String(error.message || error), "error"); }
  }
  // one poll at a time, the next a second after the last answer; a poll of a page left behind stops
  const generation = ++chartGeneration;
  const next = async () => {
    await poll();
    if (generation === chartGeneration && pageTimer) pageTimer = setTimeout(next, 1000);
  };
  pageTimer = setTimeout(next, 0);
}

/* --- routing ------------------------------------------------------------------------------- */

const PAGES = { cluster: pageCluster, topics: pageTopics, groups: pageGroups, messages: pageMessages, charts: pageCharts };

async function route() {
  if (pageTimer) { clearTimeout(pageTimer); pageTimer = null; }
  chartGeneration += 1;
  const [page, arg] = (location.hash.replace(/^#\//, "") || "cluster").split("/");
  document.querySelectorAll("nav a").forEach(a => a.classList.toggle("active",
    a.dataset.page === page || (page === "group" && a.dataset.page === "groups")
    || (page === "topic" && a.dataset.page === "topics")));
  const root = view();
  root.replaceChildren(el("p", { class: "muted" }, "Loading…"));
  try {
    if (page === "group") await pageGroup(root, decodeURIComponent(arg || ""));
    else if (page === "topic") await pageTopic(root, decodeURIComponent(arg || ""));
    else await (PAGES[page] || pageCluster)(root);
    root.dataset.page = page;
    status("");
  } catch (error) { showError(root, error); }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);
