"""Read every span of Phoenix's default project through Phoenix's own client (test helper).

Usage: ``python get_spans.py BASE_URL OUT_JSON WANT``: polls (at most 60 s) until the
project holds WANT spans (ingestion is asynchronous), then writes the client's span list.
"""

import json
import sys
import time

from phoenix.client import Client

client = Client(base_url=sys.argv[1])
want = int(sys.argv[3])
deadline = time.monotonic() + 60
while True:
    spans = client.spans.get_spans(project_identifier="default", limit=10_000)
    if len(spans) >= want or time.monotonic() > deadline:
        break
    time.sleep(0.5)
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(list(spans), f)
print(len(spans))
