'use strict';
// A minimal Lambda Runtime API loop for the Node.js peer: what the managed
// runtime's client does, without its extras. Init is the load of the
// handler (the SDK and its client); then GET /next, handle, POST the
// response, over one keep-alive connection.

const http = require('node:http');

const API = '/2018-06-01/runtime';
const [host, port] = process.env.AWS_LAMBDA_RUNTIME_API.split(':');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function call(method, path, body, extra = {}) {
  return new Promise((resolve, reject) => {
    const headers = body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...extra };
    const request = http.request({ host, port, method, path, agent, headers }, (response) => {
      const chunks = [];
      response.on('data', (chunk) => chunks.push(chunk));
      response.on('end', () => resolve({ headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

async function main() {
  let handler;
  try {
    handler = require('./handler.js');
  } catch (err) {
    await call('POST', `${API}/init/error`, JSON.stringify({ errorMessage: String(err), errorType: err.name }));
    throw err;
  }
  for (;;) {
    const next = await call('GET', `${API}/invocation/next`);
    const requestId = next.headers['lambda-runtime-aws-request-id'];
    let path = `${API}/invocation/${requestId}/response`;
    let body;
    try {
      body = JSON.stringify(await handler.handle(JSON.parse(next.body), requestId));
    } catch (err) {
      console.error(err);
      path = `${API}/invocation/${requestId}/error`;
      body = JSON.stringify({ errorMessage: String(err), errorType: err.name });
    }
    // Echoed exactly as received, as the managed runtimes do.
    const invocationId = next.headers['lambda-runtime-invocation-id'];
    await call('POST', path, body, invocationId === undefined ? {} : { 'lambda-runtime-invocation-id': invocationId });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
