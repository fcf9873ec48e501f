// The first steps of the realtime decode order (SPEC RT-4): byte ceiling,
// then UTF-8, then JSON syntax with depth and element ceilings, refusing
// repeated keys, before any value reaches the schema step. The ceilings
// mirror the server's codec (SPEC RT-13): 64 KiB, depth 16, 4,096
// elements; a deployment may lower them, never raise them.
//
// Pure: no IO, no clock. Refusals name a closed failure kind (SPEC RT-14)
// and never echo the input.

/** The SPEC RT-13 ceilings of one decoded event or frame. */
export const JSON_CEILINGS = Object.freeze({ maxBytes: 64 * 1024, maxDepth: 16, maxElements: 4096 });

/**
 * Limits lowered from `JSON_CEILINGS` (a value above a ceiling is clamped).
 * @param {Partial<{maxBytes:number,maxDepth:number,maxElements:number}>} [l]
 */
export function jsonLimits(l = {}) {
  const pick = (k) => Math.min(JSON_CEILINGS[k], positive(l[k]) ?? JSON_CEILINGS[k]);
  return Object.freeze({ maxBytes: pick("maxBytes"), maxDepth: pick("maxDepth"), maxElements: pick("maxElements") });
}

/** Limits of a snapshot answer (a whole state, not one event): larger, same shape. */
export const SNAPSHOT_CEILINGS = Object.freeze({ maxBytes: 4 * 1024 * 1024, maxDepth: 16, maxElements: 65536 });

function positive(v) {
  return Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

/** A refusal: `{ ok: false, failure }`, failure a SPEC RT-14 kind. */
export const refuse = (failure) => ({ ok: false, failure });

const utf8 = new TextEncoder();

/** Bytes of `s` in UTF-8, without encoding it when it cannot matter. */
export function utf8Length(s, atMost = Infinity) {
  if (s.length * 3 <= atMost) return Math.min(s.length * 3, utf8.encode(s).length);
  return utf8.encode(s).length;
}

/**
 * SPEC RT-4 up to the schema: `input` is bytes (`Uint8Array`: the byte
 * ceiling, then strict UTF-8) or a string a browser already decoded (a
 * WebSocket text frame: the ceiling on its UTF-8 length). Then one strict
 * JSON parse with the depth and element ceilings, refusing repeated keys.
 * @returns {{ok:true,value:any}|{ok:false,failure:string}}
 */
export function decodeJson(input, limits = JSON_CEILINGS) {
  let text;
  if (typeof input === "string") {
    if (utf8Length(input, limits.maxBytes) > limits.maxBytes) return refuse("EVENT_TOO_LARGE");
    text = input;
  } else {
    if (input.byteLength > limits.maxBytes) return refuse("EVENT_TOO_LARGE");
    try {
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(input);
    } catch {
      return refuse("MALFORMED_EVENT");
    }
  }
  return parseStrict(text, limits);
}

/**
 * Strict RFC 8259 parse of `text` with `limits.maxDepth` (objects and
 * arrays nested; the outermost is depth 1) and `limits.maxElements` (every
 * value counts one, keys do not). A repeated key is refused (what
 * `JSON.parse` would silently resolve to its last value).
 */
export function parseStrict(text, limits = JSON_CEILINGS) {
  const p = new Parser(text, limits);
  try {
    p.ws();
    const value = p.value(0);
    p.ws();
    if (p.i !== text.length) throw SYNTAX;
    return { ok: true, value };
  } catch (e) {
    if (e === TOO_LARGE) return refuse("EVENT_TOO_LARGE");
    if (e === SYNTAX) return refuse("MALFORMED_EVENT");
    throw e;
  }
}

const SYNTAX = Symbol("syntax");
const TOO_LARGE = Symbol("too large");
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

class Parser {
  constructor(text, limits) {
    this.s = text;
    this.i = 0;
    this.limits = limits;
    this.elements = 0;
  }
  ws() {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.i++;
    }
  }
  count() {
    if (++this.elements > this.limits.maxElements) throw TOO_LARGE;
  }
  value(depth) {
    this.count();
    const c = this.s[this.i];
    if (c === "{" || c === "[") {
      if (depth + 1 > this.limits.maxDepth) throw TOO_LARGE;
      return c === "{" ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') return this.string();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (this.s.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(this.s);
    if (!m || m[0].length === 0) throw SYNTAX;
    this.i += m[0].length;
    const n = Number(m[0]);
    if (!Number.isFinite(n)) throw SYNTAX; // beyond a double, as the server refuses
    return n;
  }
  object(depth) {
    this.i++; // {
    const out = Object.create(null);
    const seen = new Set();
    this.ws();
    if (this.s[this.i] === "}") {
      this.i++;
      return toPlain(out);
    }
    for (;;) {
      this.ws();
      if (this.s[this.i] !== '"') throw SYNTAX;
      const key = this.string();
      if (seen.has(key)) throw SYNTAX;
      seen.add(key);
      this.ws();
      if (this.s[this.i++] !== ":") throw SYNTAX;
      this.ws();
      out[key] = this.value(depth);
      this.ws();
      const c = this.s[this.i++];
      if (c === "}") return toPlain(out);
      if (c !== ",") throw SYNTAX;
    }
  }
  array(depth) {
    this.i++; // [
    const out = [];
    this.ws();
    if (this.s[this.i] === "]") {
      this.i++;
      return out;
    }
    for (;;) {
      this.ws();
      out.push(this.value(depth));
      this.ws();
      const c = this.s[this.i++];
      if (c === "]") return out;
      if (c !== ",") throw SYNTAX;
    }
  }
  string() {
    // The closing quote: the first one not escaped. JSON.parse decodes the
    // escapes of exactly that slice (and refuses raw control characters).
    const s = this.s;
    let j = this.i + 1;
    for (;;) {
      if (j >= s.length) throw SYNTAX;
      const c = s.charCodeAt(j);
      if (c === 0x22) break;
      j += c === 0x5c ? 2 : 1;
    }
    const raw = s.slice(this.i, j + 1);
    this.i = j + 1;
    let v;
    try {
      v = JSON.parse(raw);
    } catch {
      throw SYNTAX;
    }
    if (hasLoneSurrogate(v)) throw SYNTAX;
    return v;
  }
}

/** A prototype-free object copied into a plain one (`__proto__` as data). */
function toPlain(o) {
  const out = {};
  for (const k of Object.keys(o)) Object.defineProperty(out, k, { value: o[k], enumerable: true, writable: true, configurable: true });
  return out;
}

function hasLoneSurrogate(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return true;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return true;
    }
  }
  return false;
}
