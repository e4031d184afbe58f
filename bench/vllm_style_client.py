#!/usr/bin/env python3
"""A streaming client written to behave like vLLM's benchmark request loop, for comparison.

It reproduces what `vllm bench serve` does per request (read in vllm-project/vllm
vllm/benchmarks/lib/endpoint_request_func.py @ 02cfb534df5674737558730b10f23d1b7aef9b7c,
async_request_openai_completions; written anew here, not copied): one aiohttp ClientSession,
an asyncio semaphore for the concurrency limit, a POST with the JSON payload, `async for chunk in
response.content.iter_any()`, an incremental UTF-8 decode into a string buffer split on blank
lines (and, as vLLM's handler, a json.loads of an unterminated `data:` tail to see whether it is
complete), `json.loads` per event, a perf_counter timestamp per event with TTFT and ITL kept.
Left out: vLLM strips the bytes of each read before decoding (which can join two events when a
read ends between the two newlines of a separator) and its tqdm progress bar.

Usage: vllm_style_client.py URL NUM_REQUESTS CONCURRENCY [OUTPUT_TOK]
Prints one line: `requests/s <rate> completed <n> failed <n> events <n>`.
"""
import asyncio
import codecs
import json
import sys
import time

import aiohttp


async def one_request(session, url, payload, semaphore, stats):
    async with semaphore:
        start = time.perf_counter()
        last = start
        first = None
        itl = []
        events = 0
        try:
            async with session.post(url, json=payload) as response:
                if response.status != 200:
                    stats["failed"] += 1
                    return
                decoder = codecs.getincrementaldecoder("utf-8")()
                buffer = ""
                async for piece in response.content.iter_any():
                    buffer += decoder.decode(piece)
                    messages = []
                    while "\n\n" in buffer:
                        message, buffer = buffer.split("\n\n", 1)
                        message = message.strip()
                        if message:
                            messages.append(message)
                    # As vLLM's handler does: a tail without its blank line is taken as complete
                    # when it is [DONE] or parses as JSON (one more json.loads per read).
                    if buffer.startswith("data: "):
                        tail = buffer.removeprefix("data: ").strip()
                        if tail == "[DONE]":
                            messages.append(buffer.strip())
                            buffer = ""
                        elif tail:
                            try:
                                json.loads(tail)
                                messages.append(buffer.strip())
                                buffer = ""
                            except json.JSONDecodeError:
                                pass
                    for message in messages:
                        if message.startswith(":"):
                            continue
                        data = message.removeprefix("data: ")
                        if data == "[DONE]":
                            continue
                        chunk = json.loads(data)
                        events += 1
                        if chunk.get("choices"):
                            now = time.perf_counter()
                            if first is None:
                                first = now - start
                            else:
                                itl.append(now - last)
                            last = now
            if first is None:
                stats["failed"] += 1
            else:
                stats["completed"] += 1
                stats["events"] += events
        except Exception:  # a benchmark client records failures, it does not stop
            stats["failed"] += 1


async def main():
    url, num_requests, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    output_tok = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    payload = {
        "model": "m",
        "prompt": "hello world",
        "max_tokens": output_tok,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    stats = {"completed": 0, "failed": 0, "events": 0}
    semaphore = asyncio.Semaphore(concurrency)
    # vLLM sizes its connector to the concurrency limit and keeps connections alive.
    connector = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        start = time.perf_counter()
        await asyncio.gather(
            *(one_request(session, url, payload, semaphore, stats) for _ in range(num_requests)))
        duration = time.perf_counter() - start
    print(f"requests/s {stats['completed'] / duration:.1f} completed {stats['completed']} "
          f"failed {stats['failed']} events {stats['events']}")


if __name__ == "__main__":
    asyncio.run(main())
