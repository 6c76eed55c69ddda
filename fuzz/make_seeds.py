#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (committed; rerun after editing this file).

Every seed is written here by hand or derived from this repository's own files (configs/*.yaml,
scaler/tests/fixtures/*.prom). Names are <n>-<what>, so a failing seed says what it was for.
Usage: python3 fuzz/make_seeds.py   (rewrites fuzz/corpus/ whole)
"""
import json
import os
import re
import shutil
import struct
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / "corpus"


def write(target, seeds, encoding="latin-1"):
    """str seeds are bytes spelt as text ("\xff" is the byte 0xff) unless encoding says utf-8."""
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    for i, (name, data) in enumerate(seeds):
        if isinstance(data, str):
            data = data.encode(encoding)
        safe = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60]
        (d / f"{i:03d}-{safe}").write_bytes(data)


# ---------------------------------------------------------------- client requests
CHAT = json.dumps({"model": "llama-sim", "messages": [{"role": "user", "content": "What is a tidegate?"}]})
STREAM = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})


def req(method="POST", target="/v1/chat/completions", version="HTTP/1.1", headers=(), body=""):
    head = f"{method} {target} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head + body


def cl(body, extra=()):
    return req(headers=[("Host", "gw"), ("Content-Type", "application/json"), *extra,
                        ("Content-Length", str(len(body.encode())))], body=body)


def chunked(body_chunks, te="chunked", ext="", trailers="", extra=()):
    body = "".join(f"{len(c):x}{ext}\r\n{c}\r\n" for c in body_chunks) + f"0{ext}\r\n{trailers}\r\n"
    return req(headers=[("Host", "gw"), *extra, ("Transfer-Encoding", te)], body=body)


def client_seeds():
    s = []
    a = s.append
    a(("get healthz", req("GET", "/healthz")))
    a(("get models auth", req("GET", "/v1/models", headers=[("Host", "gw"), ("Authorization", "Bearer sk-demo")])))
    a(("get query", req("GET", "/admin/costs?by=tenant&from=0&to=1e9&format=csv", headers=[("Host", "gw")])))
    a(("http10 close", req("GET", "/readyz", "HTTP/1.0")))
    a(("http10 keepalive", req("GET", "/readyz", "HTTP/1.0", [("Connection", "keep-alive")]) + req("GET", "/healthz")))
    a(("post chat cl", cl(CHAT)))
    a(("post stream cl", cl(STREAM, [("Authorization", "Bearer sk-1"), ("X-Request-Id", "abc")])))
    a(("post cl zero", cl("")))
    a(("post connection close", cl(CHAT, [("Connection", "close")]) + req("GET", "/never")))
    a(("pipeline 3", req("GET", "/healthz") + cl(CHAT) + req("GET", "/metrics")))
    a(("pipeline chunked then get", chunked([CHAT[:10], CHAT[10:]]) + req("GET", "/readyz")))
    a(("pipeline partial second", cl(CHAT) + "GET /healthz HTTP/1.1\r\nHost: g"))
    a(("chunked simple", chunked([CHAT])))
    a(("chunked many", chunked([CHAT[i:i + 3] for i in range(0, len(CHAT), 3)])))
    a(("chunked ext", chunked([CHAT], ext=";name=value")))
    a(("chunked ext quoted", chunked([CHAT], ext=';a="b;c";d')))
    a(("chunked ext long", chunked([CHAT], ext=";" + "x" * 600)))
    a(("chunked trailers", chunked([CHAT], trailers="X-Trailer: 1\r\nX-Other: two\r\n")))
    a(("chunked uppercase hex", req(headers=[("Transfer-Encoding", "chunked")], body="A\r\n0123456789\r\n0\r\n\r\n")))
    a(("chunked leading zeros", req(headers=[("Transfer-Encoding", "chunked")], body="0005\r\nhello\r\n000\r\n\r\n")))
    a(("chunked size space", req(headers=[("Transfer-Encoding", "chunked")], body="5 \r\nhello\r\n0\r\n\r\n")))
    a(("chunked size tab ext", req(headers=[("Transfer-Encoding", "chunked")], body="5\t;x\r\nhello\r\n0\r\n\r\n")))
    a(("chunked huge size", req(headers=[("Transfer-Encoding", "chunked")], body="ffffffffffffffff\r\nabc\r\n0\r\n\r\n")))
    a(("chunked hex overflow", req(headers=[("Transfer-Encoding", "chunked")], body="10000000000000000\r\nabc\r\n0\r\n\r\n")))
    a(("chunked 7fff", req(headers=[("Transfer-Encoding", "chunked")], body="7fffffffffffffff\r\nabc")))
    a(("chunked negative", req(headers=[("Transfer-Encoding", "chunked")], body="-5\r\nhello\r\n0\r\n\r\n")))
    a(("chunked 0x prefix", req(headers=[("Transfer-Encoding", "chunked")], body="0x5\r\nhello\r\n0\r\n\r\n")))
    a(("chunked missing crlf", req(headers=[("Transfer-Encoding", "chunked")], body="5\r\nhelloX\r\n0\r\n\r\n")))
    a(("chunked bare lf", req(headers=[("Transfer-Encoding", "chunked")], body="5\nhello\n0\n\n")))
    a(("chunked no last", req(headers=[("Transfer-Encoding", "chunked")], body="5\r\nhello\r\n")))
    a(("chunked over body limit", chunked(["x" * 200])))
    a(("chunked big body", chunked(["y" * 3000, "z" * 3000])))
    for te in ["chunked, identity", "identity, chunked", "gzip, chunked", "gzip", "xchunked", "chunkedx", "Chunked",
               "CHUNKED", " chunked ", "chunked\t", "chunked,", ",chunked", ", chunked", "\"chunked\"", "chunked;q=1",
               "identity", "chunked, chunked", "deflate,chunked", "a=b, chunked", "\"x,y\", chunked", "chunked ,",
               "gzip,\tchunked"]:
        a((f"te {te}", chunked([CHAT], te=te)))
    a(("te twice", req(headers=[("Transfer-Encoding", "gzip"), ("Transfer-Encoding", "chunked")],
                       body="5\r\nhello\r\n0\r\n\r\n")))
    a(("te twice chunked", req(headers=[("Transfer-Encoding", "chunked"), ("Transfer-Encoding", "chunked")],
                               body="5\r\nhello\r\n0\r\n\r\n")))
    a(("te then cl", req(headers=[("Transfer-Encoding", "chunked"), ("Content-Length", "5")], body="5\r\nhello\r\n0\r\n\r\n")))
    a(("cl then te", req(headers=[("Content-Length", "5"), ("Transfer-Encoding", "chunked")], body="5\r\nhello\r\n0\r\n\r\n")))
    a(("cl duplicate same", req(headers=[("Content-Length", "5"), ("Content-Length", "5")], body="hello")))
    a(("cl duplicate differ", req(headers=[("Content-Length", "5"), ("Content-Length", "6")], body="hello!")))
    a(("cl list", req(headers=[("Content-Length", "5, 5")], body="hello")))
    a(("cl list differ", req(headers=[("Content-Length", "5, 6")], body="hello!")))
    for v in ["+5", "-1", "0x10", "99999999999999999999", "18446744073709551615", " 5", "5 ", "", "5a", "05"]:
        a((f"cl {v}", req(headers=[("Content-Length", v)], body="hello")))
    a(("cl over body limit", cl("q" * 300)))
    a(("obs fold", "POST /v1/completions HTTP/1.1\r\nHost: gw\r\nX-Folded: one\r\n  two\r\nContent-Length: 2\r\n\r\n{}"))
    a(("obs fold te", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip,\r\n chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
    a(("bare lf head", "GET /healthz HTTP/1.1\nHost: gw\n\n"))
    a(("bare cr head", "GET /healthz HTTP/1.1\rHost: gw\r\r"))
    a(("mixed lf", "POST / HTTP/1.1\r\nContent-Length: 2\n\r\n{}"))
    a(("nul in value", "GET / HTTP/1.1\r\nX-A: a\x00b\r\n\r\n"))
    a(("nul in target", "GET /a\x00b HTTP/1.1\r\n\r\n"))
    a(("nul in body", cl("{\"a\":\"\x00\"}")))
    a(("nul first", "\x00GET / HTTP/1.1\r\n\r\n"))
    a(("leading crlf", "\r\n\r\nGET / HTTP/1.1\r\n\r\n"))
    a(("expect continue", cl(CHAT, [("Expect", "100-continue")])))
    a(("upgrade", req("GET", "/", headers=[("Connection", "Upgrade"), ("Upgrade", "websocket")]) + "junk after upgrade"))
    a(("options star", req("OPTIONS", "*")))
    a(("absolute form", req("GET", "http://gw:8080/v1/models")))
    a(("connect", req("CONNECT", "gw:443")))
    a(("unknown method", req("FROB", "/x")))
    a(("lowercase method", req("get", "/x")))
    a(("http20", req("GET", "/", "HTTP/2.0")))
    a(("http12", req("GET", "/", "HTTP/1.2")))
    a(("http9", "GET /\r\n\r\n"))
    a(("double space", "GET  / HTTP/1.1\r\n\r\n"))
    a(("space before colon", "GET / HTTP/1.1\r\nHost : gw\r\n\r\n"))
    a(("empty name", "GET / HTTP/1.1\r\n: x\r\n\r\n"))
    a(("no colon", "GET / HTTP/1.1\r\nBadHeader\r\n\r\n"))
    a(("tab in value", "GET / HTTP/1.1\r\nX-A:\tv\t\r\n\r\n"))
    a(("del in value", "GET / HTTP/1.1\r\nX-A: v\x7f\r\n\r\n"))
    a(("high bytes value", "GET / HTTP/1.1\r\nX-A: \xc3\xa9\xff\r\n\r\n"))
    a(("many headers", "GET / HTTP/1.1\r\n" + "".join(f"X-H{i}: {i}\r\n" for i in range(60)) + "\r\n"))
    a(("long header", "GET / HTTP/1.1\r\nX-Long: " + "v" * 400 + "\r\n\r\n"))
    a(("long target", "GET /" + "p" * 500 + " HTTP/1.1\r\n\r\n"))
    a(("near header limit", "GET / HTTP/1.1\r\nX-Big: " + "b" * 16300 + "\r\n\r\n"))
    a(("keepalive close token", req("GET", "/", headers=[("Connection", "keep-alive, close")]) + req("GET", "/2")))
    a(("connection list", req("GET", "/", "HTTP/1.0", [("Connection", "foo, keep-alive")]) + req("GET", "/2")))
    a(("proxy connection", req("GET", "/", headers=[("Proxy-Connection", "close")]) + req("GET", "/2")))
    a(("admin delete", req("DELETE", "/admin/cache?tenant=acme&model=m", headers=[("Authorization", "Bearer admin")])))
    a(("post limits", cl('{"min_replicas":1,"max_replicas":3}', [("Authorization", "Bearer admin")])))
    a(("empty", ""))
    a(("crlf only", "\r\n"))
    return s


# ---------------------------------------------------------------- upstream responses
def resp(status="200 OK", headers=(), body="", version="HTTP/1.1"):
    return f"{version} {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n" + body


COMPLETION = json.dumps({"id": "c1", "object": "chat.completion", "choices": [
    {"index": 0, "message": {"role": "assistant", "content": "A tidegate is a gate."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15}})


def sse_event(obj):
    return "data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n"


def stream_body():
    ev = [sse_event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    for w in ["A ", "tidegate ", "is ", "a ", "gate."]:
        ev.append(sse_event({"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}))
    ev.append(sse_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    ev.append(sse_event({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}}))
    ev.append(sse_event("[DONE]"))
    return ev


def chunk_body(parts, trailers=""):
    return "".join(f"{len(p.encode()):x}\r\n{p}\r\n" for p in parts) + f"0\r\n{trailers}\r\n"


def upstream_seeds():
    s = []
    a = s.append
    js = ("Content-Type", "application/json")
    ev = ("Content-Type", "text/event-stream")
    a(("200 cl json", resp(headers=[js, ("Content-Length", str(len(COMPLETION)))], body=COMPLETION)))
    a(("200 chunked sse", resp(headers=[ev, ("Transfer-Encoding", "chunked")], body=chunk_body(stream_body()))))
    a(("200 chunked sse merged", resp(headers=[ev, ("Transfer-Encoding", "chunked")], body=chunk_body(["".join(stream_body())]))))
    a(("200 chunked sse split", resp(headers=[ev, ("Transfer-Encoding", "chunked")],
                                     body=chunk_body([c for e in stream_body() for c in (e[:7], e[7:])]))))
    a(("200 sse close delimited", resp(headers=[ev, ("Connection", "close")], body="".join(stream_body()))))
    a(("200 json close delimited", resp(headers=[js], body=COMPLETION)))
    a(("http10 close delimited", resp(headers=[js], body=COMPLETION, version="HTTP/1.0")))
    a(("100 continue then 200", resp("100 Continue") + resp(headers=[js, ("Content-Length", "2")], body="{}")))
    a(("103 early hints then 200", resp("103 Early Hints", [("Link", "</s.css>; rel=preload")]) +
       resp(headers=[ev, ("Transfer-Encoding", "chunked")], body=chunk_body(stream_body()[:2]))))
    a(("nine interim heads", resp("100 Continue") * 9 + resp(headers=[("Content-Length", "0")])))
    a(("eight interim heads", resp("102 Processing") * 8 + resp(headers=[("Content-Length", "2")], body="{}")))
    a(("101 switching", resp("101 Switching Protocols", [("Upgrade", "h2c"), ("Connection", "Upgrade")])))
    a(("999 status", resp("999 Whatever", [("Content-Length", "0")])))
    a(("199 status", resp("199 Odd", [("Content-Length", "0")])))
    a(("600 status", resp("600 Beyond", [("Content-Length", "0")])))
    a(("000 status", resp("000 Zero", [("Content-Length", "0")])))
    a(("204 with cl", resp("204 No Content", [("Content-Length", "5")]) + "hello"))
    a(("304", resp("304 Not Modified", [("Content-Length", "10")])))
    a(("500 error json", resp("500 Internal Server Error", [js, ("Content-Length", "40")],
                              '{"error":{"message":"boom","type":"x"}}')))
    a(("502", resp("502 Bad Gateway", [("Content-Length", "0")])))
    a(("503 retry after", resp("503 Service Unavailable", [("Retry-After", "3"), ("Content-Length", "0")])))
    a(("no reason phrase", resp("200", [("Content-Length", "2")], "{}")))
    a(("reason with spaces", resp("200 It Is  Fine ", [("Content-Length", "2")], "{}")))
    a(("chunked trailers", resp(headers=[js, ("Transfer-Encoding", "chunked")],
                                body=chunk_body([COMPLETION], trailers="X-Usage: 15\r\n"))))
    a(("chunked ext", resp(headers=[("Transfer-Encoding", "chunked")], body="5;x=y\r\nhello\r\n0;z\r\n\r\n")))
    a(("chunked huge size", resp(headers=[("Transfer-Encoding", "chunked")], body="fffffffffffffffff\r\nab")))
    a(("chunked then close", resp(headers=[ev, ("Transfer-Encoding", "chunked"), ("Connection", "close")],
                                  body=chunk_body(stream_body()[:3]))))
    a(("truncated body", resp(headers=[js, ("Content-Length", "100")], body=COMPLETION[:50])))
    a(("content type twice", resp(headers=[("Content-Type", "text/plain"), ev, ("Content-Length", "0")])))
    a(("sse charset", resp(headers=[("Content-Type", "text/event-stream; charset=utf-8"), ("Content-Length", "19")],
                           body="data: [DONE]\n\n\n\n\n")))
    a(("te and cl", resp(headers=[("Content-Length", "3"), ("Transfer-Encoding", "chunked")], body="3\r\nabc\r\n0\r\n\r\n")))
    a(("te gzip", resp(headers=[("Transfer-Encoding", "gzip")], body="xyz")))
    a(("bare lf", "HTTP/1.1 200 OK\nContent-Length: 2\n\n{}"))
    a(("http09ish", "{}"))
    a(("keepalive with extra", resp(headers=[("Content-Length", "2")], body="{}") + "HTTP/1.1 200 OK\r\n\r\n"))
    a(("empty", ""))
    return s


# ---------------------------------------------------------------- SSE streams
def sse_seeds():
    s = []
    a = s.append
    a(("vllm stream", "".join(stream_body())))
    a(("crlf events", "".join(e.replace("\n", "\r\n") for e in stream_body())))
    a(("multi line data", "data: {\"choices\":\ndata: [{\"index\":0,\"text\":\"x\"}]}\n\n"))
    a(("comment and event", ": keep-alive\n\nevent: message\ndata: {\"choices\":[{\"text\":\"a\"}]}\nid: 7\nretry: 100\n\n"))
    a(("no space after colon", "data:{\"choices\":[{\"text\":\"b\"}]}\n\ndata:[DONE]\n\n"))
    a(("two spaces", "data:  [DONE]\n\n"))
    a(("field without colon", "data\n\nevent\n\n"))
    a(("stray blank lines", "\n\n\r\n\ndata: [DONE]\n\n\n\n"))
    a(("no final blank line", "data: [DONE]\n"))
    a(("cr only", "data: [DONE]\r\r"))
    a(("mixed endings", "data: a\r\n\ndata: b\n\r\n"))
    a(("usage only", sse_event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})))
    a(("error event", "event: error\ndata: {\"error\":{\"message\":\"x\"}}\n\n"))
    a(("llamacpp style", "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"Hi\"}}],"
                         "\"created\":1,\"model\":\"m\",\"object\":\"chat.completion.chunk\"}\n\n"))
    a(("escaped content", sse_event({"choices": [{"index": 0, "delta": {"content": "q\"\\\n\u00e9\U0001F600"}}]})))
    a(("big data", "data: " + json.dumps({"choices": [{"index": 0, "text": "w" * 5000}]}) + "\n\n"))
    a(("many small", "".join(f"data: {i}\n\n" for i in range(300))))
    a(("invalid json data", "data: {\"choices\":[\n\ndata: {oops}\n\n"))
    a(("empty", ""))
    return s


# ---------------------------------------------------------------- completion JSON (chunk scan)
def chunk_seeds():
    shapes = [
        {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "logprobs": None, "finish_reason": None}]},
        {"choices": [{"delta": {"content": "lo"}, "index": 0, "finish_reason": "stop"}], "usage": None},
        {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}},
        {"choices": [{"index": 2, "text": "two"}, {"index": 0, "text": "zero", "finish_reason": "length"}]},
        {"choices": [{"text": "no index at all"}]},
        {"choices": [{"index": 0.0, "text": "a float index"}, {"index": 0, "text": "int"}]},
        {"choices": [{"index": "0", "text": "string index"}]},
        {"choices": [1, None, "x", {"index": 0, "delta": {"content": "after non-objects"}}]},
        {"choices": [{"index": 0, "delta": "a string delta", "text": "the text"}]},
        {"choices": [{"index": 0, "delta": {"content": None}, "text": "ignored"}]},
        {"choices": [{"index": 0, "delta": {"content": "nest", "tool_calls": [{"id": "t", "function": {"arguments": "{\"a\":[1,{\"b\":true}]}"}}]}}]},
        {"choices": {"index": 0}, "usage": {"prompt_tokens": 1.5, "completion_tokens": -2}},
        {"usage": {"prompt_tokens": 99999999999999999999, "completion_tokens": 1e3}},
        {"usage": {"prompt_tokens": 9223372036854775807, "completion_tokens": -9223372036854775808}},
        {"usage": [1, 2]},
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole body"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        {"choices": [{"index": 0, "message": "not an object", "text": "fallback"}]},
        {"a": True, "b": False, "c": None, "d": -0.5e-3, "e": [[], {}], "choices": [{"index": 0, "delta": {"content": "x"}}]},
        {"choices": [{"index": 0, "finish_reason": 5}]},
        {},
    ]
    s = [(f"shape {i}", json.dumps(x)) for i, x in enumerate(shapes)]
    a = s.append
    a(("escapes", '{"choices":[{"index":0,"delta":{"content":"esc \\"q\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9 \\u4e2d \\ud83d\\ude00"}}]}'))
    a(("escaped key", '{"choi\\u0063es":[{"ind\\u0065x":0,"delta":{"cont\\u0065nt":"escaped keys"}}]}'))
    a(("spaced", '  { "choices" : [ { "index" : 0 , "delta" : { "content" : "spaced" } } ] }\r\n'))
    a(("dup usage", '{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}'))
    a(("dup choices", '{"choices":[{"text":"a"}],"choices":[]}'))
    a(("dup content", '{"choices":[{"delta":{"content":"a","content":"b"}}]}'))
    a(("dup index", '{"choices":[{"index":1,"index":0,"text":"t"}]}'))
    a(("raw utf8", '{"choices":[{"text":"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"}]}'))
    a(("bad utf8", '{"choices":[{"text":"\xff\xfe"}]}'))
    a(("minus zero", '{"usage":{"prompt_tokens":-0,"completion_tokens":0e0}}'))
    a(("exponent overflow", '{"usage":{"prompt_tokens":1e2147483648},"choices":[{"text":"t","x":0e400}]}'))
    a(("depth 32", '{"a":' * 31 + '1' + '}' * 31))
    a(("depth 33", '{"a":' * 32 + '1' + '}' * 32))
    a(("arrays deep", '{"a":' + '[' * 31 + ']' * 31 + '}'))
    for bad in ['{"choices":[{"index":0,"delta":{"content":"unterminated}', '{"a":1} trailing', '{"a":1,}',
                '{"a":"\\x"}', '{"a":"\\ud83d lone"}', '{"a":01}', '{"a":tru}', '{"a":"ctl\x01"}', '["array"]',
                'not json', '', '{"a":1e}', '{"a":-}', '{"a":.5}', '{"a":"\\udc00"}', '{"a":NaN}', '{"a":1}{"b":2}']:
        a(("invalid " + bad[:20], bad))
    a(("done", "[DONE]"))
    return s


# ---------------------------------------------------------------- request bodies
def request_seeds():
    s = []
    a = s.append
    chat = {"model": "llama-sim", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
    a(("chat", json.dumps(chat)))
    a(("chat stream", json.dumps({**chat, "stream": True})))
    a(("chat stream usage", json.dumps({**chat, "stream": True, "stream_options": {"include_usage": True}})))
    a(("chat stream usage false", json.dumps({**chat, "stream": True, "stream_options": {"include_usage": False}})))
    a(("stream options null", json.dumps({**chat, "stream": True, "stream_options": None})))
    a(("stream options empty", json.dumps({**chat, "stream": True, "stream_options": {}})))
    a(("stream options other", json.dumps({**chat, "stream": True, "stream_options": {"x": 1}})))
    a(("stream options string", json.dumps({**chat, "stream": True, "stream_options": "yes"})))
    a(("stream options twice", '{"model":"m","messages":[{}],"stream":true,"stream_options":{"include_usage":true},"stream_options":null}'))
    a(("completions", json.dumps({"model": "m", "prompt": "Once upon", "max_tokens": 16, "temperature": 0.7, "n": 2, "user": "u1"})))
    a(("completions array", json.dumps({"model": "m", "prompt": ["a", "b"], "stream": True})))
    a(("embeddings", json.dumps({"model": "e", "input": ["one", "two"]})))
    a(("max completion tokens", json.dumps({**chat, "max_completion_tokens": 9223372036854775807})))
    a(("uint max tokens", '{"model":"m","messages":[{}],"max_tokens":18446744073709551615}'))
    a(("double max tokens", '{"model":"m","messages":[{}],"max_tokens":1.0,"n":1e2}'))
    a(("temperature forms", '{"model":"m","messages":[{}],"temperature":2E-0,"n":128}'))
    a(("temperature precise", '{"model":"m","prompt":"p","temperature":0.30000000000000004}'))
    a(("temperature huge", '{"model":"m","prompt":"p","temperature":1e400}'))
    a(("temperature tiny", '{"model":"m","prompt":"p","temperature":2.2250738585072011e-308}'))
    a(("temperature digits", '{"model":"m","prompt":"p","temperature":1.00000000000000000000000000000000000001}'))
    a(("dup model", '{"model":"a","model":"b","messages":[{"a":1}]}'))
    a(("escaped model", '{"m\\u006fdel":"\\u00e9\\ud83d\\ude00","messages":[{}]}'))
    a(("messages not objects", '{"model":"m","messages":[{},1,"x"]}'))
    a(("empty messages", '{"model":"m","messages":[]}'))
    a(("model null", '{"model":null,"messages":[{}]}'))
    a(("empty object", "{}"))
    a(("whitespace", ' \t\r\n{ "model" : "m" , "prompt" : "p" , "stream" : true } \n'))
    a(("not object", '[1,2,3]'))
    a(("scalar", '"just a string"'))
    a(("number", "-0"))
    a(("bad utf8", '{"model":"\xc0\xaf","messages":[{}]}'))
    a(("surrogate utf8", '{"model":"\xed\xa0\x80","messages":[{}]}'))
    a(("overlong", '{"model":"\xe0\x80\xaf"}'))
    a(("above max", '{"model":"\xf4\x90\x80\x80"}'))
    a(("raw utf8", '{"model":"m","messages":[{"role":"user","content":"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"}]}'))
    a(("depth 32", '{"model":"m","x":' + '[' * 31 + ']' * 31 + '}'))
    a(("depth 33", '{"model":"m","x":' + '[' * 32 + ']' * 32 + '}'))
    a(("exponent overflow", '{"model":"m","prompt":"p","temperature":1e2147483648}'))
    a(("exponent limit", '{"model":"m","prompt":"p","temperature":1e2147483647,"n":1e-2147483647}'))
    a(("zero huge exponent", '{"model":"m","prompt":"p","temperature":0e400}'))
    a(("trailing comma", '{"model":"m",}'))
    a(("comment", '{"model":"m"/*c*/}'))
    a(("truncated", '{"model":"m","messages":[{"role":"user","content":"hi'))
    a(("empty", ""))
    # K10: include_usage added to a body whose numbers a round trip through Boost.JSON changes.
    so = '"stream":true,"stream_options":{"x":%s}}'
    a(("k10 rewrite long mantissa", '{"model":"m","messages":[{}],' + so % ("9" * 74 + "1")))
    a(("k10 rewrite nan", '{"model":"m","messages":[{}],"w":0e214748,' + so % "1e400"))
    a(("k10 rewrite repeated keys", '{"model":"m","messages":[{}],"stream":true,"stream_options":{"include_usage":true},'
                                    '"stream_options":{"include_usage":null,"x":0.1,"include_usage":false}}'))
    return s


# ---------------------------------------------------------------- configs
def config_seeds():
    s = []
    a = s.append
    originals = {}
    for p in sorted((ROOT / "configs").glob("*.yaml")):
        text = p.read_text()
        originals[p.stem] = text
        a((f"config {p.stem}", text))
    demo = originals["demo"]
    vllm = originals.get("vllm", demo)
    minimal = "listen: 127.0.0.1:8080\nmodels:\n  - name: m\n    replicas:\n      - {id: r1, url: http://127.0.0.1:9000}\n"
    a(("minimal", minimal))
    muts = [
        ("targets 5", demo.replace("targets: {concurrency_per_replica: 8, queue_per_replica: 2, kv_usage: 0.8}", "targets: 5")),
        ("targets list", demo.replace("targets: {concurrency_per_replica: 8, queue_per_replica: 2, kv_usage: 0.8}", "targets: [1, 2]")),
        ("signals x", demo.replace("signals: {engine_metrics: true, metrics_path: /metrics, nvml: false}", "signals: x")),
        ("signals list", demo.replace("signals: {engine_metrics: true, metrics_path: /metrics, nvml: false}", "signals: [a]")),
        ("pools scalar", re.sub(r"  pools:\n", "  pools: 7\n  old_pools:\n", demo, count=1)),
        ("lifecycle scalar", demo.replace("lifecycle: {warm_pool_size: 1, startup_timeout: 60s, drain_timeout: 60s}", "lifecycle: true")),
        ("actuator string", demo.replace("kind: process", "kind: [process]")),
        ("command map", demo.replace("command: [tidegate-sim,", "command: {a: b}\n        old: [tidegate-sim,")),
        ("ports reversed", demo.replace("ports: 21000-21099", "ports: 21099-21000")),
        ("ports huge", demo.replace("ports: 21000-21099", "ports: 0-99999999999")),
        ("ports text", demo.replace("ports: 21000-21099", "ports: a-b")),
        ("tick 1e300s", demo.replace("tick: 1s", "tick: 1e300s")),
        ("tick -1s", demo.replace("tick: 1s", "tick: -1s")),
        ("tick nan", demo.replace("tick: 1s", "tick: .nan")),
        ("tick inf", demo.replace("tick: 1s", "tick: .inf")),
        ("stable window 1e300", demo.replace("stable_window: 10s", "stable_window: 1e300")),
        ("window units", demo.replace("stable_window: 10s", "stable_window: 10ms").replace("panic_window: 4s", "panic_window: 2h")),
        ("max wait 1e300s", demo.replace("max_wait: 60s", "max_wait: 1e300s")),
        ("max wait 0x10", demo.replace("max_wait: 60s", "max_wait: 0x10")),
        ("max length 4GiB", demo.replace("max_length: 512", "max_length: 4GiB")),
        ("max length huge", demo.replace("max_length: 512", "max_length: 99999999999999999999")),
        ("max replicas float", demo.replace("max_replicas: 6", "max_replicas: 6.5")),
        ("min replicas negative", demo.replace("min_replicas: 1", "min_replicas: -1")),
        ("min above max", demo.replace("min_replicas: 1", "min_replicas: 9")),
        ("concurrency string", demo.replace("max_concurrency_per_replica: 16", "max_concurrency_per_replica: lots")),
        ("usd per hour string", demo.replace("usd_per_hour: 3.50", "usd_per_hour: cheap")),
        ("usd per hour negative", demo.replace("usd_per_hour: 3.50", "usd_per_hour: -3")),
        ("usd per hour 1e300", demo.replace("usd_per_hour: 3.50", "usd_per_hour: 1e300")),
        ("state fraction 2", demo.replace("starting: 1.0", "starting: 2.0")),
        ("budget scope bad", demo.replace('scope: "tenant:globex"', 'scope: "planet:mars"')),
        ("budget soft above hard", demo.replace("soft_usd: 0.50, hard_usd: 1.00", "soft_usd: 5, hard_usd: 1")),
        ("budget period bad", demo.replace("period: day", "period: fortnight")),
        ("budgets map", demo.replace("  budgets:\n", "  budgets: {a: 1}\n  old_budgets:\n")),
        ("tag labels huge", demo.replace("tags: {labels: [team, project]}", "tags: {labels: [" + ", ".join(f"label_{'x' * 200}{i}" for i in range(20)) + "]}")),
        ("tag labels invalid", demo.replace("tags: {labels: [team, project]}", "tags: {labels: [\"9bad\", \"has space\", \"\"]}")),
        ("tag labels scalar", demo.replace("tags: {labels: [team, project]}", "tags: {labels: team}")),
        ("api key tags huge", demo.replace("tags: {team: search, project: qa}", "tags: {" + "x" * 3000 + ": y}")),
        ("api keys scalar", re.sub(r"api_keys:\n(  - .*\n)+", "api_keys: 5\n", demo)),
        ("api key duplicate", demo.replace("key: sk-demo-ml", "key: sk-demo-search")),
        ("duplicate keys", demo.replace("threads: 0\n", "threads: 0\nthreads: 4\n")),
        ("duplicate section", demo + "\ncache: {enabled: false}\n"),
        ("cache scalar", demo.replace("cache:\n  enabled: true", "cache: yes\nold_cache:\n  enabled: true")),
        ("cache max bytes 4GiB", demo.replace("data_dir: .cache/demo/cache", "data_dir: .cache/demo/cache\n  max_bytes: 4GiB")),
        ("cache max bytes hex", demo.replace("data_dir: .cache/demo/cache", "data_dir: .cache/demo/cache\n  max_bytes: 0x100000")),
        ("cache max bytes 16EiB", demo.replace("data_dir: .cache/demo/cache", "data_dir: .cache/demo/cache\n  max_bytes: 16EiB\n  snapshot_log_bytes: 99999999999PiB")),
        ("cache ttl 1e300s", demo.replace("data_dir: .cache/demo/cache", "data_dir: .cache/demo/cache\n  ttl: 1e300s\n  max_ttl: 1e308h")),
        ("cache threshold 2", demo.replace("index: {type: hnsw}", "index: {type: hnsw}\n  threshold: 2")),
        ("cache index bogus", demo.replace("index: {type: hnsw}", "index: {type: ivf, m: 3}")),
        ("cache index params", demo.replace("index: {type: hnsw}", "index: {type: hnsw, m: 999, ef_search: 0, storage: fp8}")),
        ("cache model dir", demo.replace("embedder: {type: minilm}", "embedder: {type: minilm, model_dir: model, precision: bf16}")),
        ("cache model dir missing", demo.replace("embedder: {type: minilm}", "embedder: {type: minilm, model_dir: /nonexistent}")),
        ("cache embedder openai", demo.replace("embedder: {type: minilm}", "embedder: {type: openai, url: \"http://127.0.0.1:1\", model: e, device: gpu}")),
        ("cache models map", demo.replace("index: {type: hnsw}", "index: {type: hnsw}\n  models:\n    llama-sim: {threshold: 0.9, ttl: 0s, context: {mode: window, turns: -1}}")),
        ("cache context", demo.replace("index: {type: hnsw}", "index: {type: hnsw}\n  context: {mode: window, turns: 3}")),
        ("replica url bad", minimal.replace("http://127.0.0.1:9000", "https://x:1/path")),
        ("replica port huge", minimal.replace("http://127.0.0.1:9000", "http://127.0.0.1:999999999999")),
        ("replica port zero", minimal.replace("http://127.0.0.1:9000", "http://[::1]:0")),
        ("replica class undefined", minimal.replace("url: http://127.0.0.1:9000", "url: http://127.0.0.1:9000, class: b200") + "cost: {replica_classes: {h100: {usd_per_hour: 1}}}\n"),
        ("pool for missing model", demo.replace("- model: llama-sim", "- model: nope")),
        ("listen bad", minimal.replace("listen: 127.0.0.1:8080", "listen: 8080")),
        ("limits", minimal + "limits: {max_header_bytes: 0x4000, max_body_bytes: 4GiB, max_upstream_body_bytes: 1e300}\n"),
        ("timeouts", minimal + "timeouts: {header_read: 1e300s, idle: -5s, first_byte: 250ms}\n"),
        ("models empty", "models: []\n"),
        ("models map", "models: {a: b}\n"),
        ("root list", "- a\n- b\n"),
        ("root scalar", "hello\n"),
        ("yaml anchors", minimal + "scaler: &s\n  tick: 1s\n  pools: *s\n"),
        ("yaml tags", minimal.replace("name: m", "name: !!binary aGVsbG8=") + "threads: !!float 1\n"),
        ("yaml syntax error", "models: [\n  - {name: m\n"),
        ("yaml tabs", "models:\n\t- name: m\n"),
        ("yaml deep", "a: " + "[" * 200 + "]" * 200 + "\n"),
        ("vllm scaler kubernetes", vllm.replace("kind: process", "kind: kubernetes")),
        ("empty", ""),
    ]
    for name, text in muts:
        a((name, text))
    return s


# ---------------------------------------------------------------- prometheus
def prom_seeds():
    s = []
    for p in sorted((ROOT / "scaler/tests/fixtures").glob("*.prom")):
        s.append((f"fixture {p.stem}", p.read_bytes()))
    a = s.append
    a(("edge values", "a 1\nb NaN\nc +Inf\nd -Inf\ne Inf\nf 1e308\ng -0\nh 0x10\ni 1.5e-320\nj nan\nk inf\n"))
    a(("labels escapes", 'm{a="x\\"y",b="line\\nnext",c="back\\\\slash"} 3\nm{ a = "sp" , } 4\n'))
    a(("labels bad", 'm{a="unterminated} 1\nm{="x"} 2\nm{a=x} 3\nm{9a="x"} 4\nm{a="x"b="y"} 5\n'))
    a(("timestamps", "vllm:num_requests_waiting 3 1700000000000\nvllm:num_requests_running{model_name=\"m\"} 2 123\n"))
    a(("help type", "# HELP x help text\n# TYPE x counter\nx_total 5\n#no space\n  # indented\n"))
    a(("crlf", "vllm:num_requests_waiting 1\r\nvllm:kv_cache_usage_perc 0.5\r\n"))
    a(("tabs", "a\t1\nb{c=\"d\"}\t\t2\n"))
    a(("no trailing newline", "sglang:num_queue_reqs 7"))
    a(("llamacpp overflow", "llamacpp:prompt_tokens_cached_total 1e308\nllamacpp:prompt_tokens_cached_total 1e308\n"
                            "llamacpp:prompt_tokens_total -1e308\nllamacpp:prompt_tokens_total -1e308\n"))
    a(("dcgm", 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 50\nDCGM_FI_DEV_GPU_UTIL{gpu="1"} 100\nDCGM_FI_DEV_GPU_UTIL{gpu="01"} 7\n'))
    a(("names", ":colon 1\n_u 2\n9bad 3\nname:with:colons_1 4\nx-y 5\n"))
    a(("empty", ""))
    return s


# ---------------------------------------------------------------- traces
def trace_seeds():
    s = []
    a = s.append
    az = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    a(("azure", az + "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:51.0000000,879,0\n"))
    a(("azure T separator", az + "2023-11-16T18:15:46,374,44\n"))
    a(("azure columns reordered", "ContextTokens,x,TIMESTAMP,GeneratedTokens\n10,a,2024-02-29 00:00:00,5\n"))
    a(("azure unsorted", az + "2023-11-16 18:15:50,1,1\n2023-11-16 18:15:46,2,2\n"))
    a(("azure bad rows", az + "2023-11-16 18:15:46,abc,1\n2023-13-01 00:00:00,1,1\n2023-11-16 18:15:46,1\n"
                              "1969-12-31 23:59:59,1,1\n2023-11-16 18:15:46.,1,1\n2023-11-16 18:15:46,-1,1\n"
                              "2023-11-16 18:15:46,99999999,1\n2023-11-16 18:15:47,5,5\n"))
    a(("azure leap second", az + "2016-12-31 23:59:60,1,1\n9999-12-31 23:59:59.999999999999,1,1\n"))
    a(("azure crlf spaces", "TIMESTAMP , ContextTokens , GeneratedTokens\r\n 2023-01-01 00:00:00 , 3 , 4 \r\n"))
    a(("azure header only", az))
    a(("azure no header", "2023-01-01 00:00:00,1,1\n"))
    a(("azure int overflow", az + "2023-01-01 00:00:00,9223372036854775808,1\n"))
    mc = [{"timestamp": 0, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]},
          {"timestamp": 250, "input_length": 700, "output_length": 3, "hash_ids": [1, 3]},
          {"timestamp": 300, "input_length": 10, "output_length": 0}]
    a(("mooncake", "".join(json.dumps(r) + "\n" for r in mc)))
    a(("mooncake non chain", '{"timestamp":0,"input_length":1024,"output_length":1,"hash_ids":[5,6]}\n'
                             '{"timestamp":1,"input_length":1024,"output_length":1,"hash_ids":[7,6]}\n'))
    a(("mooncake bad", '{"timestamp":"0","input_length":1,"output_length":1}\n{"timestamp":0,"input_length":1.5,"output_length":1}\n'
                       '{"timestamp":0,"input_length":1e16,"output_length":1}\n{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[-1]}\n'
                       '{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":7}\n[1]\nnot json\n'
                       '{"timestamp":5,"input_length":3,"output_length":2}\n'))
    a(("mooncake huge timestamps", '{"timestamp":1.7e308,"input_length":1,"output_length":1}\n'
                                   '{"timestamp":-1.7e308,"input_length":1,"output_length":1}\n'))
    a(("mooncake big ids", '{"timestamp":0,"input_length":16,"output_length":1,"hash_ids":[18446744073709551615,9223372036854775807,0]}\n'))
    a(("mooncake unsorted", '{"timestamp":9,"input_length":1,"output_length":1}\n{"timestamp":1,"input_length":1,"output_length":1}\n'))
    a(("mooncake negative zero", '{"timestamp":-0.0,"input_length":-0.0,"output_length":0}\n'))
    a(("mixed", '{"timestamp":0,"input_length":1,"output_length":1}\nTIMESTAMP,ContextTokens,GeneratedTokens\n'))
    a(("blank", "\n\n  \n"))
    a(("unknown format", "hello,world\n"))
    a(("empty", ""))
    bg = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    a(("burstgpt", bg + "5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,0,1087,API log\n"
                        "118.5,ChatGPT,417,276,693,Conversation log\n"))
    a(("burstgpt reordered bad", "Log Type,Timestamp,Request tokens,Response tokens\nx,1e308,1,1\nx,nan,1,1\n"
                                 "x,3,one,1\nx,2,5\nx,-1,3,3\nx,0,0,0\n"))
    return s


# ---------------------------------------------------------------- persistence records
def frame_chunk(file_index, mode, payload):
    return bytes([file_index, mode]) + struct.pack("<H", len(payload)) + payload


def s_(b):
    return struct.pack("<I", len(b)) + b


def insert(id_, dim, ttl=3600.0, created=1_700_000_000_000, text=b"what is a tidegate", answer=b"a gate", vec=None):
    vec = vec if vec is not None else [0.5] * dim
    return (b"\x01" + struct.pack("<QqqD".replace("D", "d"), id_, created, created, ttl) + s_(b"scope") + s_(b"model") +
            s_(b"tenant") + s_(text) + s_(answer) + s_(b"stop") + struct.pack("<qq", 9, 6) +
            struct.pack("<I", len(vec)) + struct.pack(f"<{len(vec)}f", *vec))


def header(gen, dim):
    return b"\x00" + struct.pack("<IQI", 1, gen, dim)


def trailer(n):
    return b"\x03" + struct.pack("<Q", n)


def erase(id_):
    return b"\x02" + struct.pack("<Q", id_)


def persistence_seeds():
    S, L1, L2, L0, LMAX, LBIG, LX, TMP = range(8)
    s = []
    a = s.append
    def d(dim):  # byte 0: the dimension less one
        return bytes([dim - 1])

    for dim in (1, 4):
        snap = [frame_chunk(S, 0, header(1, dim)), frame_chunk(S, 0, insert(1, dim)), frame_chunk(S, 0, insert(2, dim)),
                frame_chunk(S, 0, trailer(2))]
        a((f"snapshot dim {dim}", d(dim) + b"".join(snap)))
        a((f"snapshot and logs dim {dim}", d(dim) + b"".join(snap) + frame_chunk(L1, 0, insert(3, dim)) +
           frame_chunk(L2, 0, erase(1)) + frame_chunk(L2, 0, insert(4, dim))))
    a(("log only", d(3) + frame_chunk(L1, 0, insert(7, 3)) + frame_chunk(L1, 0, erase(7)) + frame_chunk(L1, 0, insert(7, 3))))
    a(("torn tail", d(2) + frame_chunk(L1, 0, insert(1, 2)) + frame_chunk(L1, 3, insert(2, 2))))
    a(("bad crc", d(2) + frame_chunk(L1, 2, insert(1, 2)) + frame_chunk(L1, 0, insert(2, 2))))
    a(("raw garbage", d(2) + frame_chunk(L1, 1, b"TGC1\xff\xff\xff\xffgarbage")))
    a(("dim mismatch", d(4) + frame_chunk(L1, 0, insert(1, 3))))
    a(("snapshot no trailer", d(1) + frame_chunk(S, 0, header(0, 1)) + frame_chunk(S, 0, insert(1, 1))))
    a(("snapshot wrong count", d(1) + frame_chunk(S, 0, header(0, 1)) + frame_chunk(S, 0, insert(1, 1)) + frame_chunk(S, 0, trailer(5))))
    a(("snapshot data after trailer", d(1) + frame_chunk(S, 0, header(0, 1)) + frame_chunk(S, 0, trailer(0)) + frame_chunk(S, 0, insert(1, 1))))
    a(("snapshot bad version", d(1) + frame_chunk(S, 0, b"\x00" + struct.pack("<IQI", 9, 0, 1))))
    a(("snapshot gen skips logs", d(1) + frame_chunk(S, 0, header(2, 1)) + frame_chunk(S, 0, trailer(0)) +
       frame_chunk(L1, 0, insert(1, 1)) + frame_chunk(L2, 0, insert(2, 1))))
    a(("huge generations", d(1) + frame_chunk(LMAX, 0, insert(1, 1)) + frame_chunk(LBIG, 0, insert(2, 1)) +
       frame_chunk(LX, 0, insert(3, 1)) + frame_chunk(L0, 0, insert(4, 1)) + frame_chunk(TMP, 0, insert(5, 1))))
    a(("generation wraps", d(1) + frame_chunk(S, 0, header(2, 1)) + frame_chunk(S, 0, trailer(0)) +
       frame_chunk(L1, 0, insert(1, 1)) + frame_chunk(L2, 0, insert(2, 1)) + frame_chunk(LMAX, 1, b"x")))
    a(("ttl extremes", d(1) + frame_chunk(L1, 0, insert(1, 1, ttl=1e300)) + frame_chunk(L1, 0, insert(2, 1, ttl=float("nan"))) +
       frame_chunk(L1, 0, insert(3, 1, ttl=-1.0, created=-(2**63))) + frame_chunk(L1, 0, insert(4, 1, ttl=float("inf"), created=2**63 - 1))))
    a(("string length huge", d(1) + frame_chunk(L1, 0, b"\x01" + b"\x00" * 32 + b"\xff\xff\xff\x7f")))
    a(("unknown record type", d(1) + frame_chunk(L1, 0, b"\x09abc") + frame_chunk(S, 0, b"\x07")))
    a(("empty payload", d(1) + frame_chunk(L1, 0, b"")))
    a(("nan vector", d(2) + frame_chunk(L1, 0, insert(1, 2, vec=[float("nan"), float("inf")]))))
    a(("dim only", d(6)))
    return s


# ---------------------------------------------------------------- safetensors
def safetensors(header_obj, data=b"", raw_header=None, length=None):
    h = raw_header if raw_header is not None else json.dumps(header_obj).encode()
    return struct.pack("<Q", len(h) if length is None else length) + h + data


def safetensors_seeds():
    s = []
    a = s.append
    a(("one f32", safetensors({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, b"\x00" * 16)))
    a(("two tensors metadata", safetensors({"__metadata__": {"format": "pt"},
                                            "a": {"dtype": "F16", "shape": [3], "data_offsets": [0, 6]},
                                            "b": {"dtype": "I64", "shape": [], "data_offsets": [6, 14]}}, b"\x01" * 14)))
    a(("bf16 and bool", safetensors({"x": {"dtype": "BF16", "shape": [1, 4], "data_offsets": [0, 8]},
                                     "y": {"dtype": "BOOL", "shape": [2], "data_offsets": [8, 10]}}, b"\x00" * 10)))
    a(("unknown dtype", safetensors({"x": {"dtype": "Q4_K", "shape": [7], "data_offsets": [0, 5]}}, b"\x00" * 5)))
    a(("zero dim", safetensors({"x": {"dtype": "F32", "shape": [0, 5], "data_offsets": [0, 0]}})))
    a(("shape overflow", safetensors({"x": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})))
    a(("shape overflow 2", safetensors({"x": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})))
    a(("offsets reversed", safetensors({"x": {"dtype": "U8", "shape": [1], "data_offsets": [5, 4]}}, b"\x00" * 8)))
    a(("offsets outside", safetensors({"x": {"dtype": "U8", "shape": [8], "data_offsets": [0, 8]}}, b"\x00" * 4)))
    a(("offsets negative", safetensors({"x": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}})))
    a(("offsets float", safetensors({"x": {"dtype": "U8", "shape": [1.5], "data_offsets": [0.0, 1e0]}}, b"\x00")))
    a(("offsets huge", safetensors({"x": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551615, 18446744073709551615]}})))
    a(("missing fields", safetensors({"x": {"dtype": "F32"}})))
    a(("entry not object", safetensors({"x": [1, 2]})))
    a(("header array", safetensors(None, raw_header=b"[1,2]")))
    a(("header invalid json", safetensors(None, raw_header=b'{"x":')))
    a(("header length huge", safetensors(None, raw_header=b"{}", length=2**64 - 1)))
    a(("header length past", safetensors(None, raw_header=b"{}", length=3)))
    a(("header padded", safetensors(None, raw_header=b'{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}   ') + b"\x07"))
    a(("short", b"\x01\x02\x03"))
    a(("empty", b""))
    return s


# ---------------------------------------------------------------- wordpiece text
def wordpiece_seeds():
    texts = [
        "What is a tidegate?", "The quick brown fox jumps over the lazy dog.", "HELLO World!!! tokenizer's caching",
        "naïve café résumé Ångström", "İstanbul ǅemal ß ẞ", "中文 日本語 한국어 ไทย", "emoji 😀🎉 and 👩‍👩‍👧",
        "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2028line sep", "control \x01\x02\x7f chars \u200b zero width \ufeff bom",
        "\ufffd replacement and U+FFFD alone",
        "a" * 120, "un" + "able" * 30, "$+<=>^`|~ punctuation «quotes» „low” — dash … ellipsis",
        "combining e\u0301 a\u0300 o\u0308 \u0345", "ǅ ǈ ǋ ﬁ ﬀ ﬃ", "Ⅻ ① ²³ ½", "\U0001d400\U0001d41a math bold",
        "日本語の文章です。これはテストです。", "mixed中文english", "tidegate tidegates tidegating",
    ]
    return [(t[:30], t.encode("utf-8")) for t in texts] + [
        ("raw invalid", b"\xff\xfe invalid \xc0\xaf overlong \xed\xa0\x80 surrogate \xc3"),
        ("truncated 4 byte", b"x\xf0\x9f\x98"), ("empty", b"")]


# ---------------------------------------------------------------- routing stream placements
def placements(batch, version=1):
    """gateway/app/placement_wire.h: version byte, then per placement u16+model, u16+replica,
    u64 session, u32 count + u64 blocks, little-endian."""
    out = bytes([version])
    for model, replica, session, blocks in batch:
        out += struct.pack("<H", len(model)) + model + struct.pack("<H", len(replica)) + replica
        out += struct.pack("<QI", session, len(blocks)) + b"".join(struct.pack("<Q", b) for b in blocks)
    return out


def placements_seeds():
    chain = [(0x9E3779B97F4A7C15 * (i + 1)) & 0xFFFFFFFFFFFFFFFF for i in range(40)]
    one = placements([(b"m", b"r0", 0, chain[:8])])
    return [
        ("one prefix", one),
        ("session only", placements([(b"llama-3-8b", b"replica-2", 0x5E55 | 1, [])])),
        ("a batch", placements([(b"m", b"r0", 0, chain), (b"m", b"r1", 7, chain[:3]), (b"other", b"", 1, [])])),
        ("empty batch", placements([])),
        ("version 2", placements([(b"m", b"r0", 0, chain[:2])], version=2)),
        ("truncated", one[:-3]),
        ("count past end", one[:-8 * 8 - 4] + struct.pack("<I", 0x7FFFFFFF)),
        ("empty", b""),
    ]


def main():
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    write("client_request", client_seeds())
    write("upstream_response", upstream_seeds())
    write("sse", sse_seeds())
    write("chunk_scan", chunk_seeds())
    write("request_scan", request_seeds())
    write("config", config_seeds(), "utf-8")
    write("prometheus", prom_seeds())
    write("trace", trace_seeds())
    write("persistence", persistence_seeds())
    write("safetensors", safetensors_seeds())
    write("wordpiece", wordpiece_seeds())
    write("placements", placements_seeds())
    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    for d in sorted(CORPUS.iterdir()):
        print(f"{d.name:20s} {len(list(d.iterdir())):4d} seeds")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
