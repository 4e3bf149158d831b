"use strict";
// Approve and deny buttons: each POSTs the decision to the approvals API, with the credentials
// the browser signed in with. What comes back is shown as text, never as markup.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-decision]");
  if (!button) return;
  const row = button.closest("tr");
  const note = row.querySelector(".note");
  const buttons = row.querySelectorAll("button");
  const reason = row.querySelector("input[name=reason]");
  const decision = { decision: button.dataset.decision };
  if (reason && reason.value.trim() !== "") decision.reason = reason.value;
  buttons.forEach((b) => { b.disabled = true; });
  note.textContent = "sending…";
  try {
    const answer = await fetch(location.origin + "/approvals/" + encodeURIComponent(button.dataset.id), {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(decision),
    });
    if (answer.ok) {
      row.dataset.decided = decision.decision;
      note.textContent = decision.decision === "approve" ? "approved" : "denied";
    } else {
      note.textContent = "refused (" + answer.status + "): " + (await answer.text());
      buttons.forEach((b) => { b.disabled = false; });
    }
  } catch (error) {
    note.textContent = "not sent: " + error.message;
    buttons.forEach((b) => { b.disabled = false; });
  }
});
// Instants arrive in UTC; an operator reads them in their own zone, the UTC text on hover. The
// charts' times are a time of day (`hm`), with the weekday over 24 hours (`dhm`).
const forms = {
  hm: { hour: "2-digit", minute: "2-digit" },
  dhm: { weekday: "short", hour: "2-digit", minute: "2-digit" },
};
for (const t of document.querySelectorAll("time[datetime]")) {
  const at = new Date(t.dateTime);
  if (Number.isNaN(at.getTime())) continue;
  const form = forms[t.className];
  t.textContent = form ? at.toLocaleString([], form) : at.toLocaleString();
}
// A bar's hover text leads with its minute in UTC ("HH:MM UTC — …"): shown in the zone too.
for (const t of document.querySelectorAll("title[data-at]")) {
  const at = new Date(t.dataset.at);
  const rest = t.textContent.indexOf(" — ");
  if (!Number.isNaN(at.getTime()) && rest > 0) {
    t.textContent = at.toLocaleString([], forms.hm) + t.textContent.slice(rest);
  }
}
