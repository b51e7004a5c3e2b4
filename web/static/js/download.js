// download.js saves bytes the API serves behind the Authorization header: fetched with the credential,
// then handed to the browser as a blob: URL, so no credential is ever put in a URL.

/** download fetches path with client and saves it as filename. */
export async function download(client, path, filename) {
  const res = await client.raw("GET", path);
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = plainName(filename);
  a.rel = "noopener";
  a.hidden = true;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return blob.size;
}

/** plainName keeps a file name a plain name (the browser cleans it further). */
export function plainName(name) {
  const s = String(name || "download").replace(/[\\/\u0000-\u001f]/g, "_").slice(0, 200);
  return s === "" || s === "." || s === ".." ? "download" : s;
}
