// format.js turns wire values into what a person reads: times in the viewer's own zone, sizes, stages.

const timeFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

/** when formats an RFC 3339 time in the viewer's local zone; the exact time is in the title. */
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return timeFmt.format(d);
}

/** timeEl is a <time> element with the local time as text and the machine time as datetime. */
export function timeEl(iso) {
  const t = document.createElement("time");
  t.dateTime = iso || "";
  t.textContent = when(iso);
  if (iso) t.title = new Date(iso).toString();
  return t;
}

/** bytes formats a byte count. */
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let v = Number(n), i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${v} bytes` : `${v.toFixed(1)} ${units[i]}`;
}

/** seconds formats a duration in seconds for a person. */
export function seconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

/** json pretty-prints a value for a <pre> (as text). */
export function json(v) {
  return JSON.stringify(v, null, 2);
}

/** newRequestID makes a request_id for one write: [A-Za-z0-9_.:-], unique per draft or action. */
export function newRequestID(prefix) {
  // crypto.randomUUID exists only in secure contexts (HTTPS, localhost); getRandomValues everywhere.
  const b = crypto.getRandomValues(new Uint8Array(16));
  return `${prefix}-${[...b].map((x) => x.toString(16).padStart(2, "0")).join("")}`;
}
