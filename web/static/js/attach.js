// attach.js uploads a file the person attaches to a message: blob.prepare with its size and SHA-256, the
// bytes with one PUT, then blob.commit. Every step's request_id derives from the draft's, so sending the
// draft again after a lost answer names the same blob instead of making another.

import { ApiError } from "./api.js";
import { plainName } from "./download.js";

/** uploadFile stores file as a sealed blob and returns its blob_id. */
export async function uploadFile(client, file, requestIDBase) {
  if (!crypto.subtle) {
    throw new ApiError({ code: "UNSUPPORTED", message: "attaching files needs the page on HTTPS or localhost (the browser computes the file's SHA-256)" });
  }
  const bytes = await file.arrayBuffer();
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  const sha256 = [...digest].map((x) => x.toString(16).padStart(2, "0")).join("");
  const prep = await client.call("POST", "/v0/blobs", {
    request_id: `${requestIDBase}.prepare`, content_type: file.type || "application/octet-stream",
    size_bytes: file.size, sha256, filename: plainName(file.name),
  });
  try {
    await client.put(prep.upload_url, prep.upload_headers, bytes);
  } catch (e) {
    if (!(e instanceof ApiError && e.code === "UPLOAD_SEALED")) throw e; // sealed by an earlier attempt
  }
  await client.call("POST", "/v0/blobs/commit", { request_id: `${requestIDBase}.commit`, upload_id: prep.upload_id });
  return prep.blob_id;
}

/** attachAll uploads the files chosen in input for draft (each once per draft), reporting progress in
 * out, and returns their blob IDs in order. */
export async function attachAll(client, draft, input, out) {
  const ids = [];
  const chosen = input ? [...input.files] : [];
  for (const [i, f] of chosen.entries()) {
    const key = `${i}:${f.name}:${f.size}:${f.lastModified}`;
    if (!draft.blobs.has(key)) {
      out.textContent = `Uploading ${f.name} (${i + 1} of ${chosen.length})…`;
      draft.blobs.set(key, await uploadFile(client, f, `${draft.requestID}.f${i}`));
    }
    ids.push(draft.blobs.get(key));
  }
  return ids;
}
