// The `template-js` provider: a whole streaming provider in one ES module.
//
// Copy this folder to start a provider in JavaScript (see docs/src/providers/writing-a-provider.md).
// The dialect is OpenAI-style Chat Completions without tools: `POST /chat/completions`
// with `model`, `max_tokens` and text `messages`; the answer in
// `choices[0].message.content`; streamed with `stream: true`, `data:` chunks ending in
// `data: [DONE]`. Replace the five marked places with your dialect's.
//
// componentize-js builds this module into a component: the world's exported
// interfaces are the module's named exports `describe` and `chat`; the
// `stream-decoder` resource is the class `chat.StreamDecoder`. An uncaught `Error`
// is a trap (the call fails as a provider fault with no word on why), so every
// export catches everything and answers with the world's own failures.

const KEY = "template-js";
// Longest error detail kept for the server log (the kit allows 4 KiB).
const DETAIL_LIMIT = 2048;
// Deeper JSON than any answer needs: refused before parsing, never a trap.
const MAX_DEPTH = 200;

// A `result` error is thrown as an object with a `payload`: the payload is the
// `codec-error` variant the caller gets. (A thrown `Error` without one traps.)
class CodecFailure extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message.slice(0, 1024) };
  }
}
const unsupported = (message) => new CodecFailure("unsupported", message);
const malformed = (message) => new CodecFailure("malformed", message);

// ------------------------------------------------------------------ (1) who you are

export const describe = {
  providers() {
    return [
      {
        key: KEY,
        description: "Chat Completions, text only, streaming (the JavaScript template)",
        // undefined: every catalog entry names its `endpoint`.
        defaultEndpoint: undefined,
        credential: {
          tag: "header",
          val: {
            defaultCredentialId: "template-js-api-key",
            headerName: "authorization",
            prefix: "Bearer ",
            // false: a missing secret sends no header (local servers need none).
            required: false,
          },
        },
        // Flags are an object of booleans; {} is a text-only provider that does not
        // stream. `streaming: true`: the host asks for streams and hands their events
        // to `chat.StreamDecoder`; leave it out and a caller's stream is answered
        // whole and replayed.
        capabilities: { streaming: true },
        streamFraming: "sse",
      },
    ];
  },
  serves(provider, wireId) {
    return provider === KEY;
  },
  claims(provider, wireId) {
    return false;
  },
};

export const chat = {
  encode(provider, conversation, params) {
    try {
      return encode(conversation, params);
    } catch (error) {
      if (error instanceof CodecFailure) throw error;
      throw unsupported(`internal error in ${KEY}: ${error}`); // a bug becomes a named refusal, not a trap
    }
  },
  decode(provider, response) {
    try {
      return decode(response.body);
    } catch (error) {
      if (error instanceof CodecFailure) throw error;
      throw malformed(`${KEY} could not read the answer: ${error}`); // whatever the body, never a trap
    }
  },
  classify(provider, response) {
    try {
      return classify(response.status, response.headers, response.body);
    } catch (error) {
      // A class is owed whatever the body.
      return { tag: "uncorrectable", val: `HTTP ${response.status}: ${KEY} failed to classify: ${error}`.slice(0, 1024) };
    }
  },
  // One decoder per stream (part (5) below); like every export it never lets an
  // exception out: an event it cannot read is declined as `malformed`.
  StreamDecoder: class StreamDecoder {
    constructor(provider) {
      this.stream = new ChatStream();
    }
    feed(event) {
      try {
        return this.stream.read(event.name, event.data);
      } catch (error) {
        if (error instanceof CodecFailure) throw error;
        throw malformed(`${KEY} could not read a stream event: ${error}`); // never a trap
      }
    }
    finish() {
      return this.stream.finish();
    }
  },
};

// ------------------------------------------------------------------ (2) encode

function encode(conversation, params) {
  if (conversation.tools.length > 0) {
    throw unsupported(`${KEY} has no tool definitions`);
  }
  const messages = conversation.system.map((text) => ({ role: "system", content: text }));
  for (const turn of conversation.turns) {
    messages.push({ role: turn.role, content: turn.content.map(blockText).join("\n\n") });
  }
  const body = { model: params.wireModelId, max_tokens: params.maxTokens, messages };
  if (params.temperature != null) body.temperature = params.temperature;
  if (params.stop.length > 0) body.stop = params.stop;
  if (params.stream) {
    // The usage comes in a last chunk only when asked for.
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  return {
    method: "POST",
    pathAndQuery: "/chat/completions",
    headers: [["content-type", "application/json"]],
    body: new TextEncoder().encode(toJson(body)),
  };
}

// JSON text for a body. Not JSON.stringify: inside componentize-js (StarlingMonkey)
// stringifying a 1 MiB string takes 64 MiB of linear memory, the host's whole per-call
// limit, where this takes about 5. Strings from the host are valid Unicode, so
// escaping quotes, backslashes and control characters is all JSON needs.
function toJson(value) {
  if (typeof value === "string") {
    return `"${value.replace(/["\\\u0000-\u001f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}"`;
  }
  if (Array.isArray(value)) return `[${value.map(toJson).join(",")}]`;
  if (isObject(value)) {
    return `{${Object.entries(value)
      .map(([key, item]) => `${toJson(key)}:${toJson(item)}`)
      .join(",")}}`;
  }
  return JSON.stringify(value); // numbers, booleans, null
}

// Every block is sent natively, rendered as text, or refused — never dropped.
function blockText(block) {
  switch (block.tag) {
    case "text":
      return block.val;
    case "tool-use":
      return `[tool call ${block.val.name}: ${block.val.inputJson}]`;
    case "tool-result": {
      const parts = block.val.content.filter((leaf) => leaf.tag === "text").map((leaf) => leaf.val);
      if (parts.length !== block.val.content.length) {
        throw unsupported(`${KEY} cannot send an image or document inside a tool result`);
      }
      return `[tool result: ${parts.join(" ")}]`;
    }
    case "thinking":
      if (block.val.redacted) throw unsupported(`${KEY} cannot send redacted thinking`);
      return `[thinking: ${block.val.text}]`;
    default:
      throw unsupported(`${KEY} cannot send ${block.tag === "image" ? "an image" : "a document"}`);
  }
}

// ------------------------------------------------------------------ (3) decode

const STOP_REASONS = { stop: "end-turn", length: "max-tokens", content_filter: "content-filtered" };

// The body (a Uint8Array) as JSON, or `malformed`; never an exception that could trap.
function parseJson(bytes) {
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (error) {
    throw malformed(`the body is not UTF-8: ${error}`);
  }
  let depth = 0;
  for (const match of text.matchAll(/[\[\]{}]|"(?:[^"\\]|\\.)*"/g)) {
    const token = match[0];
    depth += token === "[" || token === "{" ? 1 : token === "]" || token === "}" ? -1 : 0;
    if (depth > MAX_DEPTH) throw malformed(`the body nests JSON deeper than ${MAX_DEPTH} levels`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw malformed(`the body is not JSON: ${String(error).slice(0, 200)}`);
  }
}

const isObject = (value) => typeof value === "object" && value !== null && !Array.isArray(value);
const isCount = (value) => Number.isSafeInteger(value) && value >= 0;
const stringOr = (value) => (typeof value === "string" ? value : undefined);

function decode(bytes) {
  const body = parseJson(bytes);
  const choices = isObject(body) ? body.choices : undefined;
  if (!Array.isArray(choices) || choices.length === 0 || !isObject(choices[0])) {
    throw malformed("the body has no `choices`");
  }
  const message = choices[0].message;
  const text = isObject(message) ? message.content : undefined;
  if (typeof text !== "string") throw malformed("the first choice has no text `message.content`");
  const rawStop = stringOr(choices[0].finish_reason);
  const usage = body.usage;
  let counts;
  if (isObject(usage) && isCount(usage.prompt_tokens) && isCount(usage.completion_tokens)) {
    // u64 fields are BigInt.
    counts = {
      input: BigInt(usage.prompt_tokens),
      output: BigInt(usage.completion_tokens),
      cacheRead: 0n,
      cacheWrite: 0n,
      reasoning: undefined,
    };
  }
  return {
    content: text ? [{ tag: "text", val: text }] : [],
    stopReason: Object.hasOwn(STOP_REASONS, rawStop) ? STOP_REASONS[rawStop] : "other",
    rawStopReason: rawStop,
    usage: counts,
    refusal: undefined,
    servedModel: stringOr(body.model),
    requestId: stringOr(body.id),
  };
}

// ------------------------------------------------------------------ (4) classify

// The class comes from the status (and structured fields), never from prose.
function classify(status, headers, bytes) {
  const detail = errorDetail(status, bytes);
  const retry = { hint: retryHint(headers), detail };
  if (status === 429) return { tag: "rate-limited", val: retry };
  if (status === 503 || status === 529) return { tag: "overloaded", val: retry };
  if (status >= 500 || status === 408 || status === 409 || status === 425) return { tag: "transient", val: retry };
  if (status === 401 || status === 403) return { tag: "authentication", val: detail };
  if (status === 402) return { tag: "quota-exhausted", val: detail };
  if (status === 404) return { tag: "not-found", val: detail };
  if (status >= 400 && status < 500) return { tag: "invalid-request", val: detail };
  return { tag: "uncorrectable", val: detail };
}

// One bounded line for the server log: callers only ever see the class.
function errorDetail(status, bytes) {
  let message = new TextDecoder().decode(bytes.subarray(0, DETAIL_LIMIT));
  try {
    const error = parseJson(bytes).error;
    if (isObject(error) && typeof error.message === "string") message = error.message;
  } catch {
    // not JSON: keep the raw prefix
  }
  const line = `HTTP ${status}: ${message}`;
  const encoded = new TextEncoder().encode(line);
  if (encoded.length <= DETAIL_LIMIT) return line;
  // Cut on a character boundary: the decoder drops a partial sequence as U+FFFD, removed here.
  return new TextDecoder().decode(encoded.subarray(0, DETAIL_LIMIT - 6)).replace(/\uFFFD+$/, "") + "...";
}

// `retry-after` in seconds, or as an HTTP date (Unix milliseconds: the component has no clock).
function retryHint(headers) {
  const found = headers.find(([name]) => name.toLowerCase() === "retry-after");
  if (found === undefined) return undefined;
  const value = found[1].trim();
  if (/^[0-9]+$/.test(value)) {
    const ms = BigInt(value) * 1000n;
    return { tag: "delay-ms", val: ms > 0xffffffffffffffffn ? 0xffffffffffffffffn : ms };
  }
  const at = Date.parse(value);
  return Number.isFinite(at) && at >= 0 ? { tag: "at-unix-ms", val: BigInt(at) } : undefined;
}

// ------------------------------------------------------------------ (5) the stream

// Chat Completions streams `data: {chunk}` events and ends with `data: [DONE]`: each
// chunk's `choices[0].delta` carries a piece of the text (or of a tool call's
// arguments), the chunk with a `finish_reason` says why the answer ended, and the last
// chunk (asked for with `stream_options.include_usage`) carries the usage. The
// contract is the guide's section 6. One decoder serves one stream and keeps what it
// needs between events: whether the stop was sent, and the tool calls opened.
const STREAM_STOP_REASONS = { ...STOP_REASONS, tool_calls: "tool-use" };

class ChatStream {
  constructor() {
    this.stopped = false;
    this.named = false;
    this.calls = []; // tool calls opened, by their index in the answer
  }

  read(name, bytes) {
    if (new TextDecoder().decode(bytes).trim() === "[DONE]") return [];
    const chunk = parseJson(bytes);
    if (!isObject(chunk)) throw malformed("a stream chunk is not a JSON object");
    if (name === "error" || "error" in chunk) return [inBandError(chunk)];
    const deltas = [];
    if (!this.named) {
      // What the upstream ran and its id, once (as `decode` reads them).
      this.named = true;
      if (typeof chunk.model === "string") deltas.push({ tag: "served-model", val: chunk.model });
      if (typeof chunk.id === "string") deltas.push({ tag: "request-id", val: chunk.id });
    }
    if (Array.isArray(chunk.choices) && isObject(chunk.choices[0])) deltas.push(...this.choice(chunk.choices[0]));
    const usage = chunk.usage;
    if (isObject(usage) && isCount(usage.prompt_tokens) && isCount(usage.completion_tokens)) {
      const counts = { input: BigInt(usage.prompt_tokens), output: BigInt(usage.completion_tokens) };
      deltas.push({ tag: "usage", val: { ...counts, cacheRead: 0n, cacheWrite: 0n, reasoning: undefined } });
    }
    return deltas;
  }

  choice(choice) {
    const deltas = [];
    const delta = choice.delta;
    if (isObject(delta)) {
      if (typeof delta.content === "string" && delta.content) deltas.push({ tag: "text", val: delta.content });
      for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) deltas.push(...this.toolCall(call));
    }
    const reason = stringOr(choice.finish_reason);
    if (reason !== undefined && !this.stopped) {
      this.stopped = true;
      deltas.push(...this.closeCalls());
      const stop = Object.hasOwn(STREAM_STOP_REASONS, reason) ? STREAM_STOP_REASONS[reason] : "other";
      deltas.push({ tag: "stop", val: { reason: stop, raw: reason, refusal: undefined } });
    }
    return deltas;
  }

  // A call's first piece names it (`id`, `function.name`); the others carry more of
  // its arguments, under the same `index`.
  toolCall(call) {
    if (!isObject(call) || !Number.isSafeInteger(call.index) || call.index < 0) {
      throw malformed("a streamed tool call has no index");
    }
    const index = call.index;
    const fn = isObject(call.function) ? call.function : {};
    const deltas = [];
    if (!this.calls.includes(index)) {
      if (typeof call.id !== "string" || typeof fn.name !== "string") {
        throw malformed(`tool call ${index} has no id or name in its first piece`);
      }
      this.calls.push(index);
      deltas.push({ tag: "tool-call-start", val: { index, id: call.id, name: fn.name } });
    }
    if (typeof fn.arguments === "string" && fn.arguments) {
      deltas.push({ tag: "tool-call-fragment", val: { index, json: fn.arguments } });
    }
    return deltas;
  }

  closeCalls() {
    const ended = this.calls.map((index) => ({ tag: "tool-call-end", val: index }));
    this.calls = [];
    return ended;
  }

  // The body ended. Without a `finish_reason` the upstream closed before its end:
  // decline rather than invent a stop (the host would deliver a cut answer as whole).
  finish() {
    if (!this.stopped) throw malformed(`${KEY}: the stream ended before its finish_reason`);
    return this.closeCalls();
  }
}

// An error object inside the 200 stream: its structured `code`, when it is an HTTP
// status, and the class `classify` gives that status (none: a transient failure). Its
// words go to the server log only, inside the class.
function inBandError(chunk) {
  const error = isObject(chunk.error) ? chunk.error : {};
  const status = Number.isSafeInteger(error.code) && error.code >= 400 && error.code <= 599 ? error.code : undefined;
  const message = typeof error.message === "string" ? error.message : "an error frame";
  const errorClass =
    status !== undefined
      ? classify(status, [], new TextEncoder().encode(message))
      : { tag: "transient", val: { hint: undefined, detail: `in-band: ${message}`.slice(0, 1024) } };
  return { tag: "error", val: { status, statusFromProse: false, class: errorClass } };
}
