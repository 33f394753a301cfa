'use strict';
// The plant-store handler in Node.js with @aws-sdk/client-dynamodb v3: the
// same routing, check order, validation, conditional write and responses as
// the Rust function (src/handler.rs, src/plant.rs, src/auth/,
// src/error.rs), written the way a Node Lambda function usually is: the
// client is built at load time (the init phase) and reused.

const crypto = require('node:crypto');
const { DynamoDBClient, PutItemCommand } = require('@aws-sdk/client-dynamodb');

const MAX_BODY_BYTES = 16 * 1024;
const NAME_MAX_CHARS = 256;
const TAG_MAX_CHARS = 64;
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
// Unicode White_Space, as Rust's char::is_whitespace.
const ONLY_WHITE_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/u;
const CONTROL = /[\u0000-\u001f\u007f]/u;
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const TRANSIENT_CODES = new Set([
  'ProvisionedThroughputExceededException', 'RequestLimitExceeded', 'ThrottlingException',
  'InternalServerError', 'TransactionConflictException', 'ReplicatedWriteConflictException',
  'ServiceUnavailable', 'ServiceUnavailableException', 'Throttling', 'InternalFailure',
]);
const NETWORK_ERRORS = new Set(['TimeoutError', 'RequestTimeout', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

const TABLE = (process.env.TABLE_NAME || '').trim();
const DIGESTS = (process.env.PLANTS_TOKEN_SHA256 || '')
  .split(',').map((d) => d.trim()).filter(Boolean).map((d) => Buffer.from(d, 'hex'));
if (!TABLE || DIGESTS.length === 0) {
  throw new Error('set TABLE_NAME and PLANTS_TOKEN_SHA256');
}
// The same budgets as the Rust function: 2 s to connect, 2 s per attempt,
// at most 3 attempts.
const dynamodb = new DynamoDBClient({
  maxAttempts: 3,
  requestHandler: { connectionTimeout: 2000, requestTimeout: 2000 },
});

class ApiError extends Error {
  constructor(status, code, message, headers = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

const bodyError = (code, message) => new ApiError(400, code, message);
const MISSING = () => new ApiError(401, 40101, 'missing bearer token', { 'www-authenticate': 'Bearer realm="plants"' });
const INVALID = () => new ApiError(401, 40102, 'invalid bearer token', {
  'www-authenticate': 'Bearer realm="plants", error="invalid_token"',
});

// JSON.parse checks the syntax; this walks the top-level object of the
// already valid text for its members in document order, duplicates kept,
// values as literal text (so that 1.0 and 1e3 are not taken for 1).
function members(text) {
  const ws = (i) => { while (' \t\n\r'.includes(text[i]) && i < text.length) i += 1; return i; };
  const endOfString = (i) => {
    let j = i + 1;
    while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
    return j + 1;
  };
  const endOfValue = (i) => {
    if (text[i] === '"') return endOfString(i);
    if (text[i] === '{' || text[i] === '[') {
      let depth = 0;
      let j = i;
      do {
        if (text[j] === '"') { j = endOfString(j); continue; }
        if (text[j] === '{' || text[j] === '[') depth += 1;
        if (text[j] === '}' || text[j] === ']') depth -= 1;
        j += 1;
      } while (depth > 0);
      return j;
    }
    let j = i;
    while (j < text.length && !',}] \t\n\r'.includes(text[j])) j += 1;
    return j;
  };
  const out = [];
  let i = ws(ws(0) + 1);
  while (text[i] !== '}') {
    const keyEnd = endOfString(i);
    const key = JSON.parse(text.slice(i, keyEnd));
    const valueStart = ws(ws(keyEnd) + 1);
    const valueEnd = endOfValue(valueStart);
    out.push([key, text.slice(valueStart, valueEnd)]);
    i = ws(valueEnd);
    if (text[i] === ',') i = ws(i + 1);
  }
  return out;
}

function checkText(field, raw, maxChars) {
  if (raw[0] !== '"') throw bodyError(40003, `field \`${field}\` must be a string`);
  const value = JSON.parse(raw);
  if (!value.isWellFormed()) {
    // JSON.parse keeps an unpaired surrogate escape such as "\ud800"; the Rust function refuses it.
    throw bodyError(40004, `field \`${field}\` must not contain unpaired surrogate escapes`);
  }
  const chars = [...value].length;
  if (chars < 1 || chars > maxChars) throw bodyError(40004, `field \`${field}\` must be 1 to ${maxChars} characters`);
  if (CONTROL.test(value)) throw bodyError(40004, `field \`${field}\` must not contain control characters`);
  if (ONLY_WHITE_SPACE.test(value)) throw bodyError(40004, `field \`${field}\` must not be only whitespace`);
  return value;
}

function parsePlant(body) {
  if (body.length === 0) throw bodyError(40001, 'request body is empty');
  let text;
  let document;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(body);
    document = JSON.parse(text);
  } catch (err) {
    throw bodyError(40001, `request body is not valid JSON: ${err.message}`);
  }
  if (document === null || typeof document !== 'object' || Array.isArray(document)) {
    throw bodyError(40001, 'request body must be a JSON object');
  }
  const fields = members(text);
  const seen = new Set();
  for (const [key] of fields) {
    if (seen.has(key)) throw bodyError(40001, `duplicate field \`${key}\``);
    seen.add(key);
  }
  const found = {};
  for (const [key, raw] of fields) {
    if (key !== 'id' && key !== 'name' && key !== 'tag') throw bodyError(40005, `unknown field \`${key}\``);
    found[key] = raw;
  }
  for (const key of ['id', 'name']) {
    if (!(key in found)) throw bodyError(40002, `missing required field \`${key}\``);
  }
  if (!/^-?[0-9]+$/.test(found.id)) throw bodyError(40003, 'field `id` must be an integer');
  const id = BigInt(found.id);
  if (id < I64_MIN || id > I64_MAX) {
    throw bodyError(40004, `field \`id\` must be an integer from ${I64_MIN} to ${I64_MAX}`);
  }
  const name = checkText('name', found.name, NAME_MAX_CHARS);
  const tag = 'tag' in found ? checkText('tag', found.tag, TAG_MAX_CHARS) : undefined;
  return { id, name, tag };
}

function headerValues(event, name) {
  for (const [key, values] of Object.entries(event.multiValueHeaders || {})) {
    if (key.toLowerCase() === name) return [...(values || [])];
  }
  for (const [key, value] of Object.entries(event.headers || {})) {
    if (key.toLowerCase() === name) return [value];
  }
  return [];
}

function authenticate(event) {
  const values = headerValues(event, 'authorization');
  if (values.length === 0) throw MISSING();
  if (values.length > 1 || !/^[\t -~]*$/.test(values[0])) throw INVALID();
  const space = values[0].indexOf(' ');
  const scheme = space < 0 ? values[0] : values[0].slice(0, space);
  const token = space < 0 ? '' : values[0].slice(space + 1).replace(/^ +/, '');
  if (scheme.toLowerCase() !== 'bearer' || token === '') throw MISSING();
  if (!B64TOKEN.test(token)) throw INVALID();
  const digest = crypto.createHash('sha256').update(token).digest();
  let matched = false;
  for (const known of DIGESTS) matched = crypto.timingSafeEqual(known, digest) || matched;
  if (!matched) throw INVALID();
}

function isJson(event) {
  const values = headerValues(event, 'content-type');
  if (values.length !== 1) return false;
  const [essence, ...parameters] = values[0].split(';');
  if (essence.trim().toLowerCase() !== 'application/json') return false;
  return parameters.every((parameter) => {
    const eq = parameter.indexOf('=');
    if (eq < 0) return parameter.trim() === '';
    const name = parameter.slice(0, eq).trim().toLowerCase();
    return name !== 'charset' || parameter.slice(eq + 1).trim().replace(/^"|"$/g, '').toLowerCase() === 'utf-8';
  });
}

function route(event) {
  const context = event.requestContext || {};
  let path;
  let method;
  if (event.version === '2.0') {
    path = event.rawPath || '';
    method = (context.http || {}).method || '';
  } else {
    path = event.path || '';
    method = event.httpMethod || '';
  }
  const { stage } = context;
  if (stage && stage !== '$default' && path.startsWith(`/${stage}/`)) path = path.slice(stage.length + 1);
  return { path, method };
}

async function store({ id, name, tag }) {
  const item = {
    id: { N: id.toString() },
    name: { S: name },
    created_at: { S: new Date().toISOString() },
  };
  if (tag !== undefined) item.tag = { S: tag };
  try {
    await dynamodb.send(new PutItemCommand({
      TableName: TABLE,
      Item: item,
      ConditionExpression: 'attribute_not_exists(id)',
      ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
    }));
    return 'inserted';
  } catch (err) {
    if (err.name === 'ConditionalCheckFailedException') {
      const stored = err.Item || {};
      if ((stored.name || {}).S === name && (stored.tag || {}).S === tag) return 'replayed';
      throw new ApiError(409, 40901, `a different plant with id ${id} already exists`);
    }
    if (TRANSIENT_CODES.has(err.name) || NETWORK_ERRORS.has(err.name) || NETWORK_ERRORS.has(err.code)) {
      throw new ApiError(503, 50301, 'the store is temporarily unavailable; retry later', { 'retry-after': '1' });
    }
    throw err;
  }
}

async function createPlant(event) {
  const { path, method } = route(event);
  if (path !== '/plants') throw new ApiError(404, 40401, 'no such resource');
  if (method !== 'POST') throw new ApiError(405, 40501, 'method not allowed; use POST', { allow: 'POST' });
  authenticate(event);
  const body = Buffer.from(event.body || '', event.isBase64Encoded ? 'base64' : 'utf8');
  if (body.length > MAX_BODY_BYTES) throw new ApiError(413, 41301, `request body exceeds ${MAX_BODY_BYTES} bytes`);
  if (!isJson(event)) throw new ApiError(415, 41501, 'Content-Type must be application/json');
  const plant = parsePlant(body);
  return { plant, outcome: await store(plant) };
}

async function handle(event, requestId) {
  const started = process.hrtime.bigint();
  let status = 200;
  let code = null;
  let headers = {};
  let body;
  let plantId = null;
  let outcome = null;
  try {
    const created = await createPlant(event);
    plantId = created.plant.id;
    outcome = created.outcome;
    body = created.plant.tag === undefined
      ? { name: created.plant.name }
      : { name: created.plant.name, tag: created.plant.tag };
  } catch (err) {
    if (err instanceof ApiError) {
      ({ status, code, headers } = err);
      body = { error: err.code, message: err.message };
    } else {
      status = 500;
      code = 50001;
      body = { error: 50001, message: 'internal error' };
      console.log(JSON.stringify({ level: 'ERROR', message: 'request failed', cause: String(err) }));
    }
  }
  const { path, method } = route(event);
  console.log(JSON.stringify({
    level: 'INFO',
    message: 'request',
    request_id: requestId,
    method,
    path,
    status,
    error: code,
    plant_id: plantId === null ? null : Number(plantId),
    outcome,
    latency_ms: Number(process.hrtime.bigint() - started) / 1e6,
  }));
  return {
    statusCode: status,
    headers: {
      'content-type': 'application/json',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      'x-request-id': requestId,
      ...headers,
    },
    multiValueHeaders: {},
    body: JSON.stringify(body),
    isBase64Encoded: false,
    cookies: [],
  };
}

module.exports = { handle };
