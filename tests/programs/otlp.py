"""OTLP profiles with OpenTelemetry's own Python classes (PyPI opentelemetry-proto), for
the tests: real pprof profiles converted to OTLP as the collector's pprof receiver does,
and what a file holds as those classes read it.

usage:
  otlp.py from-pprof IN.pb[.gz] OUT_BASE SERVICE [SPANS]   writes OUT_BASE.pb
      (ProfilesData), OUT_BASE.json (OTLP/JSON) and OUT_BASE.request.pb.gz (a gzipped
      ExportProfilesServiceRequest): one OTLP profile per pprof sample type, sharing
      the samples' stacks and labels, taken now (a push of it lands in the current
      hour); resource attribute service.name = SERVICE. With SPANS, the samples are
      linked in turn to SPANS spans of one trace: trace id abab…ab (16 bytes), span k's
      id a0 + k repeated (8 bytes: a1a1…a1 first)
  otlp.py retime IN OUT   writes IN with every time moved so that its first one is now
  otlp.py grpc-export HOST:PORT FILE [TOKEN]   sends FILE (gzip-compressed on the wire)
      with the official gRPC stub over h2c; prints {"code", "details", "partialSuccess"}
  otlp.py summary FILE   prints, as JSON, per sample type (type/unit) the sum of values
      (a timestamp without values counts 1) and the observations, and the attribute
      keys of resources and samples
"""

import gzip
import json
import sys
import time

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.profiles.v1development import profiles_pb2

# google/pprof's profile.proto, field by field (no protoc here): (message, [(name, number, type, repeated, message type)]).
T = descriptor_pb2.FieldDescriptorProto
PPROF = [
    ("Profile", [("sample_type", 1, T.TYPE_MESSAGE, True, "ValueType"), ("sample", 2, T.TYPE_MESSAGE, True, "Sample"),
                 ("mapping", 3, T.TYPE_MESSAGE, True, "Mapping"), ("location", 4, T.TYPE_MESSAGE, True, "Location"),
                 ("function", 5, T.TYPE_MESSAGE, True, "Function"), ("string_table", 6, T.TYPE_STRING, True, None),
                 ("time_nanos", 9, T.TYPE_INT64, False, None), ("duration_nanos", 10, T.TYPE_INT64, False, None),
                 ("period_type", 11, T.TYPE_MESSAGE, False, "ValueType"), ("period", 12, T.TYPE_INT64, False, None)]),
    ("ValueType", [("type", 1, T.TYPE_INT64, False, None), ("unit", 2, T.TYPE_INT64, False, None)]),
    ("Sample", [("location_id", 1, T.TYPE_UINT64, True, None), ("value", 2, T.TYPE_INT64, True, None),
                ("label", 3, T.TYPE_MESSAGE, True, "Label")]),
    ("Label", [("key", 1, T.TYPE_INT64, False, None), ("str", 2, T.TYPE_INT64, False, None),
               ("num", 3, T.TYPE_INT64, False, None), ("num_unit", 4, T.TYPE_INT64, False, None)]),
    ("Mapping", [("id", 1, T.TYPE_UINT64, False, None), ("memory_start", 2, T.TYPE_UINT64, False, None),
                 ("memory_limit", 3, T.TYPE_UINT64, False, None), ("file_offset", 4, T.TYPE_UINT64, False, None),
                 ("filename", 5, T.TYPE_INT64, False, None), ("build_id", 6, T.TYPE_INT64, False, None)]),
    ("Location", [("id", 1, T.TYPE_UINT64, False, None), ("mapping_id", 2, T.TYPE_UINT64, False, None),
                  ("address", 3, T.TYPE_UINT64, False, None), ("line", 4, T.TYPE_MESSAGE, True, "Line")]),
    ("Line", [("function_id", 1, T.TYPE_UINT64, False, None), ("line", 2, T.TYPE_INT64, False, None),
              ("column", 3, T.TYPE_INT64, False, None)]),
    ("Function", [("id", 1, T.TYPE_UINT64, False, None), ("name", 2, T.TYPE_INT64, False, None),
                  ("system_name", 3, T.TYPE_INT64, False, None), ("filename", 4, T.TYPE_INT64, False, None),
                  ("start_line", 5, T.TYPE_INT64, False, None)]),
]


def pprof_class():
    file = descriptor_pb2.FileDescriptorProto(name="stacklens_pprof.proto", package="perftools.profiles", syntax="proto3")
    for name, fields in PPROF:
        message = file.message_type.add(name=name)
        for field, number, kind, repeated, type_name in fields:
            f = message.field.add(name=field, number=number, type=kind,
                                  label=T.LABEL_REPEATED if repeated else T.LABEL_OPTIONAL)
            if type_name:
                f.type_name = ".perftools.profiles." + type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))


def read(path):
    data = open(path, "rb").read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def from_pprof(source, base, service, spans="0"):
    pprof = pprof_class()()
    pprof.ParseFromString(read(source))
    st = pprof.string_table
    out = profiles_pb2.ProfilesData()
    d = out.dictionary
    strings = {}

    def s(text):
        if text not in strings:
            strings[text] = len(d.string_table)
            d.string_table.append(text)
        return strings[text]

    s("")
    d.mapping_table.add()
    d.location_table.add()
    d.function_table.add()
    d.link_table.add(trace_id=bytes(16), span_id=bytes(8))
    for k in range(1, int(spans) + 1):
        d.link_table.add(trace_id=bytes([0xab] * 16), span_id=bytes([0xa0 + k] * 8))
    d.attribute_table.add()
    d.stack_table.add()
    attributes = {}

    def attribute(key, value, unit=""):
        k = (key, repr(value), unit)
        if k not in attributes:
            a = d.attribute_table.add(key_strindex=s(key), unit_strindex=s(unit))
            if isinstance(value, str):
                a.value.string_value = value
            else:
                a.value.int_value = value
            attributes[k] = len(d.attribute_table) - 1
        return attributes[k]

    mappings = {}
    for m in pprof.mapping:
        om = d.mapping_table.add(memory_start=m.memory_start, memory_limit=m.memory_limit, file_offset=m.file_offset,
                                 filename_strindex=s(st[m.filename]))
        if st[m.build_id]:
            om.attribute_indices.append(attribute("process.executable.build_id.gnu", st[m.build_id]))
        mappings[m.id] = len(d.mapping_table) - 1
    functions = {}
    for f in pprof.function:
        d.function_table.add(name_strindex=s(st[f.name]), system_name_strindex=s(st[f.system_name]),
                             filename_strindex=s(st[f.filename]), start_line=f.start_line)
        functions[f.id] = len(d.function_table) - 1
    locations = {}
    for loc in pprof.location:
        ol = d.location_table.add(mapping_index=mappings.get(loc.mapping_id, 0), address=loc.address)
        for line in loc.line:
            ol.lines.add(function_index=functions[line.function_id], line=line.line, column=line.column)
        locations[loc.id] = len(d.location_table) - 1
    stacks = {}
    shapes = []
    for sample in pprof.sample:
        key = tuple(locations[i] for i in sample.location_id)
        if key not in stacks:
            d.stack_table.add(location_indices=key)
            stacks[key] = len(d.stack_table) - 1
        labels = [attribute(st[l.key], st[l.str]) if l.str else attribute(st[l.key], l.num, st[l.num_unit])
                  for l in sample.label]
        shapes.append((stacks[key], labels))
    resource = out.resource_profiles.add()
    resource.resource.attributes.add(key="service.name", value=common_pb2.AnyValue(string_value=service))
    scope = resource.scope_profiles.add()
    scope.scope.name = "stacklens tests/programs/otlp.py (from pprof)"
    taken = time.time_ns()
    for k, t in enumerate(pprof.sample_type):
        p = scope.profiles.add(time_unix_nano=taken, duration_nano=pprof.duration_nanos,
                               period=pprof.period)
        p.sample_type.type_strindex = s(st[t.type])
        p.sample_type.unit_strindex = s(st[t.unit])
        p.period_type.type_strindex = s(st[pprof.period_type.type])
        p.period_type.unit_strindex = s(st[pprof.period_type.unit])
        for j, (sample, (stack, labels)) in enumerate(zip(pprof.sample, shapes)):
            link = j % int(spans) + 1 if int(spans) else 0
            p.samples.add(stack_index=stack, attribute_indices=labels, values=[sample.value[k]], link_index=link)
    open(base + ".pb", "wb").write(out.SerializeToString())
    request = profiles_service_pb2.ExportProfilesServiceRequest()
    request.ParseFromString(out.SerializeToString())
    open(base + ".request.pb.gz", "wb").write(gzip.compress(request.SerializeToString()))
    document = json_format.MessageToDict(out)
    # OTLP/JSON writes trace and span ids as hex, where proto3's JSON has base64.
    for link in document.get("dictionary", {}).get("linkTable", []):
        for field in ("traceId", "spanId"):
            if field in link:
                link[field] = __import__("base64").b64decode(link[field]).hex()
    open(base + ".json", "w").write(json.dumps(document))


def request_of(path):
    request = profiles_service_pb2.ExportProfilesServiceRequest()
    request.ParseFromString(read(path))
    return request


def retime(source, out):
    request = request_of(source)
    profiles = [p for rp in request.resource_profiles for sp in rp.scope_profiles for p in sp.profiles]
    times = [p.time_unix_nano for p in profiles if p.time_unix_nano]
    times += [t for p in profiles for s in p.samples for t in s.timestamps_unix_nano]
    shift = time.time_ns() - min(times)
    for p in profiles:
        if p.time_unix_nano:
            p.time_unix_nano += shift
        for s in p.samples:
            s.timestamps_unix_nano[:] = [t + shift for t in s.timestamps_unix_nano]
    open(out, "wb").write(request.SerializeToString())


def grpc_export(address, path, token=None):
    import grpc
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2_grpc

    with grpc.insecure_channel(address, compression=grpc.Compression.Gzip) as channel:
        stub = profiles_service_pb2_grpc.ProfilesServiceStub(channel)
        metadata = [("authorization", "Bearer " + token)] if token else None
        try:
            response = stub.Export(request_of(path), metadata=metadata, timeout=60)
            partial = json_format.MessageToDict(response.partial_success) if response.HasField("partial_success") else None
            print(json.dumps({"code": "OK", "details": "", "partialSuccess": partial}))
        except grpc.RpcError as e:
            print(json.dumps({"code": e.code().name, "details": e.details(), "partialSuccess": None}))


def summary(path):
    request = request_of(path)
    d = request.dictionary
    st = d.string_table
    totals = {}
    resource_keys = set()
    sample_keys = set()
    for rp in request.resource_profiles:
        resource_keys.update(a.key or st[a.key_strindex] for a in rp.resource.attributes)
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                name = st[p.sample_type.type_strindex] + "/" + st[p.sample_type.unit_strindex]
                total = totals.setdefault(name, {"sum": 0, "observations": 0})
                for sample in p.samples:
                    total["sum"] += sum(sample.values) if sample.values else len(sample.timestamps_unix_nano)
                    total["observations"] += max(len(sample.values), len(sample.timestamps_unix_nano))
                    sample_keys.update(st[d.attribute_table[a].key_strindex] for a in sample.attribute_indices)
    print(json.dumps({"totals": totals, "resourceKeys": sorted(resource_keys), "sampleKeys": sorted(sample_keys),
                      "resources": len(request.resource_profiles)}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["from-pprof"] and len(sys.argv) in (5, 6):
        from_pprof(*sys.argv[2:])
    elif sys.argv[1:2] == ["retime"] and len(sys.argv) == 4:
        retime(*sys.argv[2:])
    elif sys.argv[1:2] == ["grpc-export"] and len(sys.argv) in (4, 5):
        grpc_export(*sys.argv[2:])
    elif sys.argv[1:2] == ["summary"] and len(sys.argv) == 3:
        summary(sys.argv[2])
    else:
        sys.exit(__doc__)
