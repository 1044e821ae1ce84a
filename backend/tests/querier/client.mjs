// Real clients of Pyroscope's query API, driven by backend/tests/querier.rs: the Perses
// Pyroscope plugin's client (npm @perses-dev/pyroscope-plugin, its model/pyroscope-client)
// and a Connect client (@connectrpc/connect-node) over the querier.v1 protos in ./proto,
// compiled to a descriptor set by the test. Reads a plan (JSON) on stdin:
//   { base, tenant, descriptors, calls: [{ client: "perses", fn, params?, body? } |
//     { client: "connect", method, request, binary }] }
// and prints one result per call, in order: { ok: answer } or { error: { code, message } }.
// Connect answers are written in proto3's JSON (64-bit integers as strings); a
// google.v1.Profile answer also as `pprofBase64` (its protobuf bytes), for go tool pprof.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createFileRegistry, fromBinary, fromJson, toBinary, toJson } from '@bufbuild/protobuf';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';

// The plugin's client module is published as CommonJS (its ESM build imports a CommonJS
// @perses-dev/core by a named export Node cannot resolve).
const perses = createRequire(import.meta.url)('@perses-dev/pyroscope-plugin/lib/cjs/model/pyroscope-client.js');

const plan = JSON.parse(readFileSync(0, 'utf8'));
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(plan.descriptors)));
const service = registry.getService('querier.v1.QuerierService');
if (!service) throw new Error('querier.v1.QuerierService is not in the descriptor set');
const headers = { 'X-Scope-OrgID': plan.tenant };
const clients = {};
const connect = (binary) =>
  (clients[binary] ??= createClient(
    service,
    createConnectTransport({ baseUrl: plan.base, httpVersion: '1.1', useBinaryFormat: binary }),
  ));

async function call(c) {
  if (c.client === 'perses') {
    const options = { datasourceUrl: plan.base, headers: { ...headers, 'content-type': 'application/json' } };
    return perses[c.fn](c.params ?? {}, options, c.body);
  }
  const method = service.methods.find((m) => m.name === c.method);
  if (!method) throw new Error(`no method ${c.method}`);
  const request = fromJson(method.input, c.request);
  const answer = await connect(Boolean(c.binary))[method.localName](request, { headers });
  const json = toJson(method.output, answer);
  if (method.output.typeName === 'google.v1.Profile') {
    json.pprofBase64 = Buffer.from(toBinary(method.output, answer)).toString('base64');
  }
  return json;
}

const results = [];
for (const c of plan.calls) {
  try {
    results.push({ ok: await call(c) });
  } catch (e) {
    // A ConnectError has a code (its enum's number) and a rawMessage; a fetch error a message.
    results.push({ error: { code: e.code ?? null, message: e.rawMessage ?? e.message } });
  }
}
process.stdout.write(JSON.stringify(results));
