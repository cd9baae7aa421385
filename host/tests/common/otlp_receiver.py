"""A loopback OTLP/HTTP receiver for the telemetry tests (host/tests/cli/telemetry.rs).

Decodes each export with the official protobuf definitions (`opentelemetry-proto` from
PyPI) and appends one JSON line per request, span and metric to the file named by its
first argument. Listens on 127.0.0.1 on a free port and prints the port on stdout, then
serves until killed. With `--dead` it accepts connections and never answers (a collector
that hangs).

Lines written:
  {"kind": "request", "path": ..., "headers": {...}}
  {"kind": "span", "name", "traceId", "spanId", "parentSpanId" (hex), "flags",
   "traceState", "attributes": {...}, "resource": {...}, "scope", "start", "end",
   "status": {"code", "message"}}
  {"kind": "metric", "name", "unit", "points": [{"attributes", "count"|"value"|"sum"}]}
"""

import gzip
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

OUT = sys.argv[1]
LOCK = threading.Lock()


def value_of(any_value):
    which = any_value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    if which == "kvlist_value":
        return attributes(any_value.kvlist_value.values)
    if which == "bytes_value":
        return any_value.bytes_value.hex()
    return getattr(any_value, which)


def attributes(pairs):
    return {kv.key: value_of(kv.value) for kv in pairs}


def write(records):
    with LOCK, open(OUT, "a") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def spans_of(request):
    for rs in request.resource_spans:
        resource = attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                yield {
                    "kind": "span",
                    "name": span.name,
                    "traceId": span.trace_id.hex(),
                    "spanId": span.span_id.hex(),
                    "parentSpanId": span.parent_span_id.hex(),
                    "flags": span.flags,
                    "traceState": span.trace_state,
                    "attributes": attributes(span.attributes),
                    "resource": resource,
                    "scope": ss.scope.name,
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "status": {"code": span.status.code, "message": span.status.message},
                }


def points_of(metric):
    which = metric.WhichOneof("data")
    data = getattr(metric, which)
    points = []
    for point in data.data_points:
        entry = {"attributes": attributes(point.attributes)}
        if which in ("histogram", "exponential_histogram"):
            entry["count"] = point.count
            entry["sum"] = point.sum
        elif point.WhichOneof("value") == "as_int":
            entry["value"] = point.as_int
        else:
            entry["value"] = point.as_double
        points.append(entry)
    return which, points


def metrics_of(request):
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                which, points = points_of(metric)
                yield {
                    "kind": "metric",
                    "name": metric.name,
                    "unit": metric.unit,
                    "type": which,
                    "points": points,
                }


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        headers = {k.lower(): v for k, v in self.headers.items()}
        records = [{"kind": "request", "path": self.path, "headers": headers}]
        if self.path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            records.extend(spans_of(request))
            answer = trace_service_pb2.ExportTraceServiceResponse()
        elif self.path == "/v1/metrics":
            request = metrics_service_pb2.ExportMetricsServiceRequest()
            request.ParseFromString(body)
            records.extend(metrics_of(request))
            answer = metrics_service_pb2.ExportMetricsServiceResponse()
        else:
            self.send_response(404)
            self.end_headers()
            write(records)
            return
        write(records)
        payload = answer.SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


def hang():
    """Accept and never answer: a collector that takes the connection and stalls."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    held = []
    while True:
        connection, _ = listener.accept()
        held.append(connection)


if __name__ == "__main__":
    if "--dead" in sys.argv[2:]:
        hang()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
