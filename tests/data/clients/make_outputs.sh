#!/usr/bin/env bash
# Re-produce the real client outputs of this folder (loopback only, bounded request counts).
# Needs: python3 -m venv; PyPI reachable for the pip installs. Run from this folder.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
V=/tmp/logscope-clients
mkdir -p $V
[ -x $V/openai/bin/python ] || { python3 -m venv $V/openai && $V/openai/bin/pip install -q openai==3.57.0; }
[ -x $V/openai1/bin/python ] || { python3 -m venv $V/openai1 && $V/openai1/bin/pip install -q "openai==1.54.0" "httpx<0.28"; }
[ -x $V/aiperf/bin/aiperf ] || { python3 -m venv $V/aiperf && $V/aiperf/bin/pip install -q aiperf==0.13.0; }
[ -x $V/guidellm/bin/guidellm ] || { python3 -m venv $V/guidellm && $V/guidellm/bin/pip install -q guidellm==0.8.1; }

server() {  # port, extra flags...; stops by itself after --max-seconds
  python3 "$HERE/fake_openai_server.py" --port "$@" --max-seconds 240 &
  SRV=$!; sleep 1
}

# 1. openai 3.57.0, the SDK's own logging (OPENAI_LOG=debug), sequential, 502s / timeouts / dropped connections
server 18741 --fail-every 3 --slow-every 5 --slow-s 1.5 --drop-every 7 --tokens 8
OPENAI_LOG=debug $V/openai/bin/python "$HERE/openai_log_client.py" --style openai --port 18741 --n 6 \
  > /dev/null 2> "$HERE/openai-sdk-format.log"
kill $SRV
# 2. openai 3.57.0, '%(asctime)s - %(name)s - %(levelname)s - %(message)s' at DEBUG (httpx/httpcore too), streaming
server 18742 --fail-every 3 --slow-every 5 --slow-s 1.5 --drop-every 7 --tokens 8
$V/openai/bin/python "$HERE/openai_log_client.py" --style plain --port 18742 --n 5 --stream \
  > /dev/null 2> "$HERE/openai-plain-format.log"
kill $SRV
# 3. openai 1.54.0 (old messages: 'Retrying request to /completions', tracebacks), 2 threads named in the format
server 18743 --fail-every 3 --slow-every 5 --slow-s 1.5 --drop-every 7 --tokens 8
$V/openai1/bin/python "$HERE/openai_log_client.py" --style threads --threads 2 --port 18743 --n 8 \
  > /dev/null 2> "$HERE/openai-v1-threads.log"
kill $SRV
# 3b. openai 3.57.0, logging.basicConfig(level=INFO): no time, no DEBUG lines
server 18746 --fail-every 3 --slow-every 5 --slow-s 1.5 --drop-every 7 --tokens 8
$V/openai/bin/python "$HERE/openai_log_client.py" --style bare --port 18746 --n 6 \
  > /dev/null 2> "$HERE/openai-info-bare.log"
kill $SRV

# A local word-level tokenizer (aiperf and guidellm need one; the hub is not reachable here)
TOK=$V/wordlevel-tokenizer
$V/aiperf/bin/python - "$TOK" <<'PY'
import string, sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
words = ["tok", "the", "a", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are",
         "with", "as", "I", "his", "they", "be", "at", "one", "have", "this"]
words += list(string.ascii_letters) + list(string.punctuation) + [str(i) for i in range(100)]
tok.train_from_iterator([" ".join(words)] * 3, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>").save_pretrained(sys.argv[1])
PY

# 4. aiperf 0.13.0: 20 streaming requests, concurrency 4, 1.5 s timeout, 20 % cancelled 50 ms after sending
server 18744 --fail-every 7 --slow-every 9 --slow-s 3 --tokens 16 --token-delay 0.01
rm -rf $V/aiperf-art
$V/aiperf/bin/aiperf profile --model tiny --url http://127.0.0.1:18744 --endpoint-type completions --streaming \
  --tokenizer "$TOK" --request-count 20 --concurrency 4 --synthetic-input-tokens-mean 20 --output-tokens-mean 16 \
  --random-seed 1 --request-timeout-seconds 1.5 --request-cancellation-rate 20 --request-cancellation-delay 0.05 \
  --ui-type simple --artifact-dir $V/aiperf-art > /dev/null 2>&1
cp $V/aiperf-art/profile_export.jsonl "$HERE/aiperf-profile_export.jsonl"
kill $SRV

# 5. guidellm 0.8.1: concurrency 1 then 3, 10 requests or 2.5 s each, 1 s timeout
server 18745 --fail-every 7 --slow-every 4 --slow-s 3 --tokens 16 --token-delay 0.01
HF_HUB_OFFLINE=1 $V/guidellm/bin/guidellm run --backend kind=openai_http,target=http://127.0.0.1:18745,model=tiny,timeout=1 \
  --profile kind=concurrent --override profile.streams 1,3 --constraint kind=max_requests,count=10 \
  --constraint kind=max_duration,seconds=2.5 --data kind=synthetic_text,prompt_tokens=20,output_tokens=16 \
  --tokenizer kind=hf_auto,model="$TOK" --output kind=json,path="$HERE/guidellm-benchmarks.json" \
  --disable-progress > /dev/null 2>&1
kill $SRV

# 6. the example of docs/client-schema.md (stdlib only), 6 calls against the test server
python3 "$HERE/run_doc_example.py" "$HERE/generic-attempts.jsonl"
