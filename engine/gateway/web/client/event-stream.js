// A bounded SSE parser (SPEC RT-8, RT-13; seed §6.3) for a stream read
// with `fetch`: bytes in, strict UTF-8 (a stream that is not UTF-8 is
// refused, never repaired), CR / LF / CRLF line ends, a leading BOM,
// comments, multi-line `data`, `event`, `id`, `retry`. What it holds of an
// incomplete line and block is capped (128 KiB): past that the stream is
// refused as EVENT_TOO_LARGE, nothing is silently cut.
//
// Each block reports the `id` it carried itself (null if none), not the
// one a previous block set: a CURSOR event must carry its own cursor.
// Pure: no IO, no clock.

import { utf8Length } from "./json.js";

/** SPEC RT-13: the SSE parser's incomplete buffer. */
export const SSE_MAX_BUFFER = 128 * 1024;

/** Thrown by `SseParser.push` with a failure kind (SPEC RT-14). */
export class SseFailure extends Error {
  constructor(failure) {
    super(failure);
    this.failure = failure;
  }
}

/** One parser per response. */
export class SseParser {
  constructor(maxBuffer = SSE_MAX_BUFFER) {
    this.max = Math.min(maxBuffer, SSE_MAX_BUFFER);
    this.decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
    this.line = "";
    this.cr = false; // the last chunk ended in CR: an LF first in the next one is part of it
    this.block = { event: "", data: [], id: null, size: 0 };
  }

  /**
   * Feeds bytes (`Uint8Array`); returns what they completed, in order:
   * `{type:"event", event, data, id}` (event "" is `message`),
   * `{type:"retry", ms}`, `{type:"comment"}`. Throws `SseFailure`.
   */
  push(bytes) {
    let text;
    try {
      text = this.decoder.decode(bytes, { stream: true });
    } catch {
      throw new SseFailure("MALFORMED_EVENT");
    }
    const out = [];
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x0a && this.cr && i === start && this.line === "") {
        this.cr = false;
        start = i + 1;
        continue;
      }
      this.cr = false;
      if (c === 0x0d || c === 0x0a) {
        this.line += text.slice(start, i);
        this.cr = c === 0x0d;
        this.onLine(this.line, out);
        this.line = "";
        start = i + 1;
      }
    }
    this.line += text.slice(start);
    this.check(this.line.length + this.block.size, () => utf8Length(this.line) + this.block.size);
    return out;
  }

  /** The end of the response: an incomplete block is dropped (seed §6.3). */
  end() {
    try {
      this.decoder.decode();
    } catch {
      throw new SseFailure("MALFORMED_EVENT");
    }
    this.line = "";
    this.block = { event: "", data: [], id: null, size: 0 };
  }

  check(units, bytes) {
    if (units * 3 > this.max && bytes() > this.max) throw new SseFailure("EVENT_TOO_LARGE");
  }

  onLine(line, out) {
    if (line === "") {
      const b = this.block;
      if (b.data.length > 0) out.push({ type: "event", event: b.event, data: b.data.join("\n"), id: b.id });
      this.block = { event: "", data: [], id: null, size: 0 };
      return;
    }
    if (line.charCodeAt(0) === 0x3a) {
      out.push({ type: "comment" });
      return;
    }
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    const b = this.block;
    switch (name) {
      case "data":
        b.data.push(value);
        b.size += utf8Length(value) + 1;
        this.check(b.size, () => b.size);
        break;
      case "event":
        b.event = value;
        break;
      case "id":
        if (!value.includes("\0")) b.id = value;
        break;
      case "retry":
        if (/^[0-9]{1,9}$/.test(value)) out.push({ type: "retry", ms: Number(value) });
        break;
      default:
        break; // unknown fields are ignored (the SSE standard)
    }
  }
}
