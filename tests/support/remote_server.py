#!/usr/bin/python3
"""The remote shard tests' HTTP server (tests/integration/remote_shards_test.cpp): files under
--root served on 127.0.0.1 with Range and ETag/If-None-Match, as a plain web server or, with
--s3 BUCKET, as an S3 endpoint (path-style GET /BUCKET/KEY and ListObjectsV2 GET
/BUCKET?list-type=2, two keys a page) that checks every request's SigV4 signature with botocore's
signer (python3-botocore) against --access-key/--secret-key/--region and answers 403 when it
differs.

Faults are switched at run time by PUT /__faults with a JSON object (missing keys: off):
  latency_ms       delay before each response's first byte
  bandwidth        body bytes per second per transfer (a cap)
  bandwidth_total  body bytes per second over all transfers together (a cap on the server's pipe)
  reset_every      GETs 1, N+1, 2N+1, ... of each object are cut half-way by a TCP reset
  short_every      ... close cleanly half-way (a body shorter than its Content-Length)
  stall_every      ... stop sending half-way for stall_s seconds
  stall_s          how long a stall lasts
  status_every     ... answer `status` (default 503) with Retry-After: 1
  status           the status of status_every
  not_found        every object GET answers 404
  etag_change      the object's ETag changes after its first GET (it was replaced meanwhile)
  only             the faults apply to paths containing this text only
  only_end         ... to paths ending with this text only (a shard, not its index file beside it)
The counts are per object, so which request of an object fails does not depend on how the
client interleaves its transfers. The server exits when its parent process is gone.
GET /__stats gives the counters as JSON: requests, object_gets, range_gets, not_modified,
faults, bytes, bad_signatures, listings. Prints its port on stdout's first line; stops on SIGTERM.
"""
import argparse
import hashlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

LOCK = threading.Lock()
FAULTS = {}
PER_PATH = {}
PIPE = {"free_at": 0.0}  # bandwidth_total: when the server's pipe is next free
PIPE_SLACK_S = 0.01  # bandwidth_total: the most of a late wake-up the pipe makes up (0.5 MB at 50 MB/s)
STATS = {"requests": 0, "object_gets": 0, "range_gets": 0, "not_modified": 0, "faults": 0, "bytes": 0,
         "bad_signatures": 0, "listings": 0}
ARGS = None


def count(key, n=1):
    with LOCK:
        STATS[key] += n


def signature_ok(handler, path, query):
    """Recomputes the request's SigV4 signature with botocore and compares."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    signed = fields.get("SignedHeaders", "").split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return False
    url = "http://" + handler.headers["Host"] + path + ("?" + query if query else "")
    headers = {name: handler.headers[name] for name in signed if handler.headers.get(name) is not None}
    request = AWSRequest(method=handler.command, url=url, headers=headers)
    request.context["timestamp"] = handler.headers["x-amz-date"]
    credentials = Credentials(ARGS.access_key, ARGS.secret_key, handler.headers.get("x-amz-security-token"))
    signer = S3SigV4Auth(credentials, "s3", ARGS.region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    return expected == fields.get("Signature")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as web servers and object stores send: with Nagle's algorithm a body's last
    # partial segment waited for the client's delayed ACK (up to 40 ms on loopback) after the
    # response headers went out in a segment of their own.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_PUT(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path == "/__faults":
            with LOCK:
                FAULTS.clear()
                FAULTS.update(json.loads(body or b"{}"))
                PER_PATH.clear()
                PIPE.update(free_at=0.0)
            return self.reply(200)
        self.reply(405)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        count("requests")
        split = urllib.parse.urlsplit(self.path)
        path, query = split.path, split.query
        if path == "/__stats":
            with LOCK:
                return self.reply(200, json.dumps(STATS).encode(), [("Content-Type", "application/json")])
        if ARGS.s3:
            if not signature_ok(self, path, query):
                count("bad_signatures")
                body = b"<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>no</Message></Error>"
                return self.reply(403, body)
            parts = path.lstrip("/").split("/", 1)
            if parts[0] != ARGS.s3:
                return self.reply(404, b"<Error><Code>NoSuchBucket</Code></Error>")
            if len(parts) == 1 or parts[1] == "":
                return self.list_objects(urllib.parse.parse_qs(query))
            path = "/" + urllib.parse.unquote(parts[1])
        else:
            path = urllib.parse.unquote(path)
        self.send_object(path)

    def list_objects(self, params):
        count("listings")
        prefix = params.get("prefix", [""])[0]
        start = params.get("continuation-token", [""])[0]
        keys = []
        for folder, _, files in os.walk(ARGS.root):
            for f in files:
                key = os.path.relpath(os.path.join(folder, f), ARGS.root)
                if key.startswith(prefix):
                    keys.append(key)
        keys = sorted(k for k in keys if k > start)
        page, rest = keys[:2], keys[2:]
        xml = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
               "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
               "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>" % (escape(ARGS.s3), escape(prefix), len(page)),
               "<IsTruncated>%s</IsTruncated>" % ("true" if rest else "false")]
        for k in page:
            xml.append("<Contents><Key>%s</Key><Size>%d</Size></Contents>" % (escape(k), os.path.getsize(os.path.join(ARGS.root, k))))
        if rest:
            xml.append("<NextContinuationToken>%s</NextContinuationToken>" % escape(page[-1]))
        xml.append("</ListBucketResult>")
        self.reply(200, "".join(xml).encode(), [("Content-Type", "application/xml")])

    def send_object(self, path):
        with LOCK:
            faults = dict(FAULTS)
            STATS["object_gets"] += 1
            n = PER_PATH[path] = PER_PATH.get(path, 0) + 1
        if faults.get("only") and faults["only"] not in path:
            faults = {}
        if faults.get("only_end") and not path.endswith(faults["only_end"]):
            faults = {}
        if faults.get("latency_ms"):
            time.sleep(faults["latency_ms"] / 1000.0)
        file = os.path.realpath(os.path.join(ARGS.root, path.lstrip("/")))
        if not file.startswith(os.path.realpath(ARGS.root) + os.sep) or not os.path.isfile(file) or faults.get("not_found"):
            return self.reply(404, b"not found")
        every = lambda key: faults.get(key) and (n - 1) % faults[key] == 0
        if every("status_every"):
            count("faults")
            return self.reply(faults.get("status", 503), b"slow down", [("Retry-After", "1")])
        st = os.stat(file)
        etag = '"%x-%x"' % (st.st_size, st.st_mtime_ns)
        if faults.get("etag_change") and n > 1:
            etag = '"%x-%x-v2"' % (st.st_size, st.st_mtime_ns)
        if self.headers.get("If-None-Match") == etag:
            count("not_modified")
            return self.reply(304, b"", [("ETag", etag)])
        size = st.st_size
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a) if a else 0
            end = min(int(b), size - 1) if b else size - 1
            if start >= size:
                return self.reply(416, b"", [("Content-Range", "bytes */%d" % size)])
            status = 206
            count("range_gets")
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = None
        if every("reset_every") or every("short_every") or every("stall_every"):
            count("faults")
            cut = start + (end - start + 1) // 2
        # The body goes out with sendfile(2) from the page cache: the test server spends as little
        # of the machine's CPU as it can (it shares the cores with the loader it serves, where a
        # real server would not), in one call per body without a cap.
        out = self.connection.fileno()
        with open(file, "rb") as f:
            pos = start
            rate = faults.get("bandwidth")
            # Under a per-transfer cap, chunks of about 20 ms of it, so a body arrives piece by
            # piece; under the pipe's cap, 64 KiB (1.3 ms at 50 MB/s).
            step = max(1024, min(65536, int(rate / 50))) if rate else 65536 if faults.get("bandwidth_total") else end + 1
            began = time.monotonic()
            while pos <= end:
                piece = min(step, end - pos + 1, (cut - pos) if cut and cut > pos else step)
                if cut is not None and pos >= cut:
                    self.wfile.flush()
                    self.close_connection = True
                    if every("reset_every"):
                        # A TCP reset: linger 0, then the descriptor closed at once (socketserver
                        # would first send a FIN with its shutdown(SHUT_WR)).
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        os.close(self.connection.detach())
                        raise ConnectionResetError("reset by the test server")
                    if every("stall_every"):
                        time.sleep(faults.get("stall_s", 5))
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                # Counted before it is sent: a client that has every byte finds them all counted.
                count("bytes", piece)
                sent = 0
                while sent < piece:
                    k = os.sendfile(out, f.fileno(), pos + sent, piece - sent)
                    if k == 0:
                        return  # the file shrank under us; the client sees a short body
                    sent += k
                pos += piece
                if rate:
                    ahead = (pos - start) / rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
                if faults.get("bandwidth_total"):
                    # The pipe is free again once what went before it has passed at the cap's rate.
                    # A sleep that overran (the scheduler, this thread's own work) is made up from
                    # a bucket of PIPE_SLACK_S: without it each chunk lost its overrun and one
                    # transfer got well under the cap (docs/remote.md); time the pipe stood idle
                    # beyond that is not saved up for a burst.
                    with LOCK:
                        now = time.monotonic()
                        PIPE["free_at"] = max(PIPE["free_at"], now - PIPE_SLACK_S) + piece / faults["bandwidth_total"]
                        ahead = PIPE["free_at"] - now
                    if ahead > 0:
                        time.sleep(ahead)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--s3", default="")
    parser.add_argument("--access-key", default="")
    parser.add_argument("--secret-key", default="")
    parser.add_argument("--region", default="us-east-1")
    ARGS = parser.parse_args()
    # socketserver listens with a backlog of 5: eight connections opened at once (a loader's
    # transfers) overflow it while the accepting thread waits for the GIL, and the dropped SYN is
    # sent again only after a second, a stall no real store has.
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.handle_error = lambda request, address: None  # a cut connection is the point, not news
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    parent = os.getppid()

    def watch_parent():
        # A test killed before it could stop the server (a timeout, a crash) must not leave it
        # running, holding the test runner's output pipe open.
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    server.server_close()


if __name__ == "__main__":
    main()
