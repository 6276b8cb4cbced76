#!/bin/sh
# Produces the real logs in this folder: runs Debian's nginx (1.22.1) with nginx.conf in a temp
# prefix, on 127.0.0.1:18080, against a python -m http.server upstream (:18090) and a socket that
# accepts and never answers (:18091); :18999 and :18998 have no listener. Run as root.
# Usage: ./run.sh            -> access.log, access-json.log, access-kv.log, error.log (TZ=UTC)
#        TZ=Asia/Kolkata ./run.sh ist-   -> the same files prefixed 'ist-' (nginx keeps TZ: local times at +05:30)
set -e
OUT=${1:-}
HERE=$(cd "$(dirname "$0")" && pwd)
P=$(mktemp -d)
mkdir -p "$P/logs" "$P/tmp" "$P/www/fallback"
echo hello > "$P/www/index.html"; echo hi > "$P/www/fallback/index.html"
cp "$HERE/nginx.conf" "$P/nginx.conf"
(cd "$P/www" && exec python3 -m http.server 18090 --bind 127.0.0.1 >"$P/http.log" 2>&1) &
HTTP=$!
python3 -c 'import socket,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",18091)); s.listen(16)
held=[]
while True: held.append(s.accept())' &
SILENT=$!
sleep 1
/usr/sbin/nginx -p "$P" -c "$P/nginx.conf"
sleep 0.5
U=http://127.0.0.1:18080
curl -s -o /dev/null "$U/live/index.html"
curl -s -o /dev/null -X POST -H 'Content-Type: application/json' -H 'X-Request-Id: demo-0001' -d '{"prompt":"hi"}' "$U/live/v1/completions"
curl -s -o /dev/null -H 'X-Request-Id: demo-0002' "$U/dead/"
curl -s -o /dev/null "$U/pair/"          # both peers refuse: 502, 502
curl -s -o /dev/null "$U/pair/"          # both marked down for 10 s: no live upstreams
curl -s -o /dev/null "$U/pool/index.html" # 18999 refuses, 18090 answers
curl -s -o /dev/null "$U/pool/index.html"
curl -s -o /dev/null -X POST -d 'x=1' "$U/pool/index.html"
curl -s -o /dev/null "$U/slow/"          # proxy_read_timeout 2s: 504
curl -s -o /dev/null --max-time 0.5 "$U/slow/" || true   # client gives up first: 499
sleep 2.5
curl -s -o /dev/null "$U/fallback/"      # dead group, error_page -> @fallback: ' : ' separator
curl -s -o /dev/null "$U/local"          # no upstream at all
curl -s -o /dev/null -A 'agent with "quotes" and \ backslash' "$U/live/index.html?q=a%20b"
sleep 11                                  # past fail_timeout: the pair is tried again
curl -s -o /dev/null "$U/pair/"
/usr/sbin/nginx -p "$P" -c "$P/nginx.conf" -s quit
sleep 1
kill $HTTP $SILENT
for f in access.log access-json.log access-kv.log error.log; do cp "$P/logs/$f" "$HERE/$OUT$f"; done
rm -rf "$P"
