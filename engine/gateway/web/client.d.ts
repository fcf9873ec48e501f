// Types of the DTP realtime browser client (/v1/client.js).

/** The closed failure vocabulary (SPEC RT-14). */
export type FailureKind =
  | "ABORTED" | "UNSUPPORTED" | "OFFLINE" | "CONNECT_TIMEOUT" | "IDLE_TIMEOUT" | "AUTH_REQUIRED" | "FORBIDDEN"
  | "RATE_LIMITED" | "PROVIDER_UNAVAILABLE" | "PROTOCOL_MISMATCH" | "MALFORMED_EVENT" | "MAPPING_CONTRACT_VIOLATION"
  | "EVENT_CONFLICT" | "EVENT_TOO_LARGE" | "DUPLICATE_EVENT" | "STALE_EVENT" | "SEQUENCE_GAP" | "CURSOR_EXPIRED"
  | "QUEUE_OVERFLOW" | "APPLY_FAILED" | "POLL_BUDGET_EXHAUSTED" | "PUSH_PERMISSION_DENIED" | "PUSH_SUBSCRIPTION_STALE"
  | "NOTIFICATION_REJECTED" | "SCOPE_FENCED" | "SCOPE_PROTOCOL_VIOLATION" | "CLOSED";

/** Why a realtime connection closed (SPEC RT-9). */
export type CloseCategory =
  | "NORMAL" | "RESTART" | "OVERLOADED" | "AUTH_REQUIRED" | "FORBIDDEN" | "PROTOCOL_MISMATCH" | "CURSOR_RESET" | "NETWORK_LOST";

export type Transport = "sse" | "ws" | "poll";

/** Where a subscription is. */
export type State =
  | "connecting" | "open" | "resyncing" | "reconnecting" | "offline" | "paused" | "degraded" | "stopped" | "closed";

/** Why the reconnect owner gave up (state "degraded"). */
export type DegradedReason = "ATTEMPTS_EXHAUSTED" | "ELAPSED_EXHAUSTED" | "HINT_MISSING" | "HINT_ABOVE_MAX_DELAY";

/** A status event: closed values, counts and delays only (never an id, cursor, token or payload). */
export interface Status {
  readonly stream: string;
  readonly transport: Transport;
  readonly state: State;
  readonly failure?: FailureKind;
  readonly degraded?: DegradedReason;
  readonly attempt?: number;
  readonly delayMs?: number;
}

/** A control the server sent (SSE `event: control`, or a `realtime.v1` RESET_REQUIRED / CLOSE). */
export type Control =
  | { readonly type: "RESET_REQUIRED"; readonly reason: FailureKind }
  | { readonly type: "GAP" }
  /**
   * `retryAfterMs`: the server's exact not-before hint (1 to 60 000 ms, `realtime.v1` only), e.g. on the
   * OVERLOADED that ends a connection that fell behind: the client reconnects no sooner, within its budgets,
   * and resumes from its last committed cursor (or a snapshot). OVERLOADED without it is not retried (DEGRADED).
   */
  | { readonly type: "CLOSE"; readonly category: CloseCategory; readonly retryAfterMs?: number };

/** What a handler learns about an event or snapshot besides its content. */
export interface EventContext {
  readonly streamId: string;
  /** The event type (events only). */
  readonly eventType?: string;
  /** The event's sequence, or the snapshot's last applied sequence ("0": none yet), canonical decimal. */
  readonly sequence: string;
}

/** The default mapper's output. */
export interface FeatureEvent {
  readonly eventType: string;
  readonly sequence: string;
  readonly payload: Record<string, unknown>;
}

/** A validated REALTIME_EVENT_V1 envelope, as a mapper receives it. */
export interface Envelope {
  readonly protocol: "REALTIME_EVENT_V1";
  readonly streamId: string;
  readonly streamEpoch: string;
  readonly eventType: string;
  readonly eventId: string;
  readonly sequence: string;
  readonly occurredAt: string;
  readonly scopeBinding: string;
  readonly payload: Record<string, unknown>;
  readonly recoveryMode: "CURSOR" | "SNAPSHOT_ONLY" | "SESSION_REBUILD";
  readonly resumeCursor: string | null;
}

export interface Handlers<E = FeatureEvent, S = unknown> {
  /** The registered event types; an event of another type fails closed (MALFORMED_EVENT). Default: any. */
  eventTypes?: Iterable<string>;
  /** The pure boundary mapper; throwing is MAPPING_CONTRACT_VIOLATION (no effect, no commit). */
  map?: (envelope: Envelope) => E;
  /** The effect, one event at a time, in sequence; the sequence is committed after it resolves. Throwing is APPLY_FAILED. */
  onEvent?: (event: E, ctx: EventContext) => void | Promise<void>;
  /** The authoritative state; its checkpoint is adopted after it resolves. */
  onSnapshot?: (state: S, ctx: EventContext) => void | Promise<void>;
  onStatus?: (status: Status) => void;
  onControl?: (control: Control) => void;
  /**
   * AUTH_REQUIRED (a 401, a CLOSE AUTH_REQUIRED, or a WebSocket upgrade the
   * gateway refused): recover the session once, e.g. `POST /v1/login` again
   * for a fresh cookie; the client then tries once more. Single flight: one
   * recovery runs at a time per client, and one per subscription until its
   * connection has been open a stable while. Without it, or when it rejects
   * or the next attempt is refused again, the subscription stops with
   * AUTH_REQUIRED (never retried).
   *
   * A browser's WebSocket sees a refused upgrade only as a close 1006, as
   * for a lost network: when the socket closes before WELCOME, the client
   * asks `GET /v1/streams/{stream}/snapshot` once with the page's cookie and
   * no `headers()` (what the upgrade carried), and a 401 there is AUTH_REQUIRED.
   */
  onAuthRequired?: () => Promise<void>;
}

export interface ReconnectPolicy {
  baseMs?: number;
  /** At most 60 000. */
  maxDelayMs?: number;
  /** At most 10. */
  maxAttempts?: number;
  /** At most 300 000. */
  maxElapsedMs?: number;
  stableAfterMs?: number;
}

export interface PollPolicy {
  /** At least 5 000. */
  minIntervalMs?: number;
  /** At most 120. */
  maxAttempts?: number;
  /** At most 1 800 000. */
  maxDurationMs?: number;
}

export interface Environment {
  fetch?: typeof fetch;
  WebSocket?: typeof WebSocket;
  now?: () => number;
  random?: () => number;
  setTimeout?: (f: () => void, ms: number) => unknown;
  clearTimeout?: (t: unknown) => void;
  document?: Pick<Document, "visibilityState" | "addEventListener" | "removeEventListener"> | null;
  window?: Pick<Window, "addEventListener" | "removeEventListener"> | null;
  navigator?: { onLine: boolean } | null;
  location?: { origin: string } | null;
}

export interface ClientOptions {
  transport?: Transport;
  baseUrl?: string;
  wsUrl?: string;
  /** Headers for each SSE and snapshot request (asked for per request, never kept). */
  headers?: () => Record<string, string>;
  reconnect?: ReconnectPolicy;
  poll?: PollPolicy;
  dedupe?: { maxIds?: number; maxAgeMs?: number };
  queue?: { maxEvents?: number; maxBytes?: number };
  limits?: { maxBytes?: number; maxDepth?: number; maxElements?: number };
  hiddenGraceMs?: number;
  idleTimeoutMs?: number;
  /** At most 30 000. */
  connectTimeoutMs?: number;
  env?: Environment;
}

export interface Metrics {
  readonly connectAttempts: number;
  readonly opens: number;
  readonly reconnects: number;
  readonly accepted: number;
  readonly rejected: number;
  readonly duplicate: number;
  readonly stale: number;
  readonly gaps: number;
  readonly conflicts: number;
  readonly resyncs: number;
  readonly snapshots: number;
  readonly polls: number;
  readonly pollNotModified: number;
  readonly overflows: number;
  readonly degraded: number;
  readonly subscriptions: number;
  /** Connections open now. */
  readonly activeConnections: number;
  /** Time since the oldest open connection last showed life (a byte, a HEARTBEAT_ACK); null with none open. */
  readonly heartbeatAgeMs: number | null;
  readonly queueHighWater: number;
  /** The most event ids one subscription's dedupe window holds now (at most 2,048, SPEC RT-13). */
  readonly dedupeIds: number;
  /** The longest time from an event's arrival to its commit (its effect included). */
  readonly applyLagMaxMs: number;
}

export interface RealtimeClient {
  /** Starts following `stream`; returns the function that stops it. */
  subscribe<E = FeatureEvent, S = unknown>(stream: string, handlers?: Handlers<E, S>): () => void;
  on(type: "status", fn: (status: Status) => void): () => void;
  on(type: "control", fn: (control: Control & { readonly stream: string }) => void): () => void;
  metrics(): Metrics;
  /** The user's manual retry: subscriptions that gave up (degraded, a stopped poll) start over with a fresh budget. */
  retry(): void;
  /** Stops every subscription and lifecycle listener. */
  close(): void;
}

export function createClient(options?: ClientOptions): RealtimeClient;

// ---- pure parts (time and randomness passed in) ----

export type Decoded<T> = { ok: true; value: T } | { ok: false; failure: FailureKind };

export interface JsonLimits { readonly maxBytes: number; readonly maxDepth: number; readonly maxElements: number }
export const JSON_CEILINGS: JsonLimits;
export const SNAPSHOT_CEILINGS: JsonLimits;
export function jsonLimits(l?: Partial<JsonLimits>): JsonLimits;
/** Byte ceiling, UTF-8 (bytes only), strict JSON with depth / element ceilings and no repeated keys. */
export function decodeJson(input: Uint8Array | string, limits?: JsonLimits): Decoded<unknown>;
export function parseStrict(text: string, limits?: JsonLimits): Decoded<unknown>;
export function decodeEnvelopeValue(v: unknown): Decoded<Envelope & { seq: bigint }>;
export function decodeServerMessageValue(v: unknown): Decoded<{ type: string } & Record<string, unknown>>;
export function decodeSseControlValue(v: unknown): Decoded<{ type: string } & Record<string, unknown>>;
export function decodeCheckpointValue(v: unknown): Decoded<Record<string, unknown> & { last: bigint }>;
export function decodeSnapshotValue(v: unknown, streamId: string): Decoded<Record<string, unknown>>;
export function isId(s: unknown): boolean;
export function isToken(s: unknown): boolean;
export function parseSequence(s: unknown): bigint | null;
export function isRfc3339(s: unknown): boolean;

export type VerdictName = "APPLY" | "DUPLICATE" | "CONFLICT" | "STALE" | "GAP" | "UNKNOWN_EPOCH" | "RESYNCING";
export const Verdict: Readonly<Record<VerdictName, VerdictName>>;
export const DEDUPE_CEILING: { readonly maxIds: number; readonly maxAgeMs: number };
export function digest(s: string): number;
/** The RT-5 table of one subscription. */
export class SequenceTable {
  constructor(dedupe?: { maxIds?: number; maxAgeMs?: number });
  readonly lastApplied: bigint;
  readonly resyncing: boolean;
  observe(ev: { epoch: string; eventId: string; seq: bigint; digest: number; cursor: string | null }, now: number): VerdictName;
  commit(seq: bigint, cursor: string | null): boolean;
  reset(epoch: string | null, last: bigint, cursor: string | null): void;
  acceptSubscribed(epoch: string, acceptedCursor: string | null, next: bigint): null | "EPOCH_CHANGED" | "POSITION_MISMATCH" | "INVALID_NEXT" | "SNAPSHOT_REQUIRED";
}

export const RECONNECT_CEILING: { readonly maxDelayMs: number; readonly maxAttempts: number; readonly maxElapsedMs: number };
export function reconnectPolicy(p?: ReconnectPolicy): Required<ReconnectPolicy>;
export function retryClass(failure: FailureKind): "NETWORK" | "THROTTLED" | "NO_RETRY";
export function closeCategory(code: number): CloseCategory;
export function statusFailure(status: number, hasHint: boolean): FailureKind;
export function retryAfterMs(value: string | null): number | null;
/** Full-jitter reconnect with attempt and elapsed budgets (SPEC RT-7). */
export class Backoff {
  constructor(policy?: ReconnectPolicy);
  readonly attempt: number;
  opened(now: number): void;
  stableAt(now: number): boolean;
  markStable(): void;
  reset(): void;
  failed(failure: FailureKind, now: number, hintMs: number | null, random: number):
    | { retry: true; delayMs: number }
    | { retry: false; degraded: DegradedReason | null; failure: FailureKind };
}

export const POLL_CEILING: { readonly minIntervalMs: number; readonly maxAttempts: number; readonly maxDurationMs: number };
export function pollPolicy(p?: PollPolicy): Required<PollPolicy>;
/** A bounded, single-flight poll lease (SPEC RT-11). */
export class PollLease {
  constructor(policy: PollPolicy | undefined, now: number);
  readonly etag: string | null;
  readonly attempts: number;
  next(now: number): { send: true } | { wait: number } | { inFlight: true } | { stopped: FailureKind };
  answered(now: number, status: number, etag: string | null, retryAfterMs: number | null): "CHANGED" | "UNCHANGED" | "RETRY" | { stopped: FailureKind };
  stop(failure?: FailureKind): void;
}

export const SSE_MAX_BUFFER: number;
export class SseParser {
  constructor(maxBuffer?: number);
  push(bytes: Uint8Array): Array<
    | { type: "event"; event: string; data: string; id: string | null }
    | { type: "retry"; ms: number }
    | { type: "comment" }>;
  end(): void;
}

export const FAILURE_KINDS: readonly FailureKind[];
export const CLOSE_CATEGORIES: readonly CloseCategory[];
export const ENVELOPE_PROTOCOL: "REALTIME_EVENT_V1";
export const SUBPROTOCOL: "realtime.v1";
/** The largest CLOSE `retryAfterMs` a server may send (60 000: SPEC RT-13's largest reconnect delay). */
export const MAX_RETRY_AFTER_MS: number;
export const RECONNECT_DEFAULTS: Readonly<Required<ReconnectPolicy>>;
export const Retry: Readonly<{ NETWORK: "NETWORK"; THROTTLED: "THROTTLED"; NO_RETRY: "NO_RETRY" }>;
export const CATEGORY_FAILURE: Readonly<Record<CloseCategory, FailureKind>>;
/** Whether a Content-Type is exactly text/event-stream (parameters aside). */
export function isEventStream(type: string | null): boolean;
/** An SSE application block as an envelope: a CURSOR event carries its own id equal to its resumeCursor. */
export function sseEnvelope(block: { data: string; id: string | null }, limits?: JsonLimits): Decoded<Envelope & { seq: bigint }>;

export type Outcome =
  | { kind: "APPLIED"; failure: null }
  | { kind: "IGNORED" | "RESYNC" | "FATAL"; failure: FailureKind };
export const QUEUE_CEILING: { readonly maxEvents: number; readonly maxBytes: number };
export function defaultMap(envelope: Envelope): FeatureEvent;
/** One subscription's apply pipeline: registry, fences, the RT-5 table, mapper, effect, commit. */
export class Feed<E = FeatureEvent> {
  constructor(o: {
    streamId: string;
    eventTypes?: Iterable<string> | null;
    map?: (envelope: Envelope) => E;
    effect: (event: E, ctx: EventContext) => void | Promise<void>;
    dedupe?: { maxIds?: number; maxAgeMs?: number };
  });
  readonly generation: number;
  readonly table: SequenceTable;
  fence(): number;
  adopt(scope: string, checkpoint: { streamEpoch: string; last: bigint; resumeCursor: string | null } | null): void;
  process(envelope: Envelope & { seq: bigint }, generation: number, now: number): Promise<Outcome>;
}
/** A bounded sequential queue (256 events or 4 MiB at most, the one in flight included). */
export class SerialQueue<T> {
  constructor(work: (item: T) => unknown, limits?: { maxEvents?: number; maxBytes?: number });
  readonly highWater: number;
  push(item: T, bytes: number): boolean;
  clear(): void;
}
