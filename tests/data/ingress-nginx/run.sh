#!/bin/sh
# Produces access.log and error.log here: Debian's nginx 1.22.1 with nginx.conf in a temp prefix on
# 127.0.0.1:18380, in front of ../gateway-tools/fake_upstream.py (:18301) and a port nothing listens on
# (:18399), driven by ../gateway-tools/drive.py and curl. Run as root, TZ=UTC.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
P=$(mktemp -d)
mkdir -p "$P/logs" "$P/tmp"
cp "$HERE/nginx.conf" "$P/nginx.conf"
python3 "$HERE/../gateway-tools/fake_upstream.py" --port 18301 --mode ok 2>"$P/upstream.err" &
UP=$!
sleep 1
/usr/sbin/nginx -p "$P" -c "$P/nginx.conf"
sleep 0.5
python3 "$HERE/../gateway-tools/drive.py" http://127.0.0.1:18380 ok:6,slow:1,abort:1,burst:2,ok:2
# two sends with no X-Request-Id: $req_id is then nginx's own $request_id
curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -d '{"model":"tiny","prompt":"hi","max_tokens":4}' \
    http://127.0.0.1:18380/v1/completions
curl -s -o /dev/null http://127.0.0.1:18380/v1/models
/usr/sbin/nginx -p "$P" -c "$P/nginx.conf" -s quit
sleep 1
kill $UP
cp "$P/logs/access.log" "$P/logs/error.log" "$P/logs/controller.log" "$HERE/"
rm -rf "$P"
