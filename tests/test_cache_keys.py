import threading

from perseval.llm.cache import RequestCache, request_key

MSG = [{"role": "user", "content": "hi"}]
SAMPLING = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64}


def test_key_changes_with_every_part():
    base = request_key("m@1", MSG, SAMPLING, 42, 0)
    assert base == request_key("m@1", MSG, dict(SAMPLING), 42, 0)
    variants = [
        request_key("m@2", MSG, SAMPLING, 42, 0),
        request_key("m@1", [{"role": "user", "content": "hi!"}], SAMPLING, 42, 0),
        request_key("m@1", MSG, {**SAMPLING, "temperature": 0.7}, 42, 0),
        request_key("m@1", MSG, {**SAMPLING, "top_p": 0.9}, 42, 0),
        request_key("m@1", MSG, {**SAMPLING, "max_tokens": 65}, 42, 0),
        request_key("m@1", MSG, SAMPLING, 43, 0),
        request_key("m@1", MSG, SAMPLING, 42, 1),
        request_key("m@1", MSG, SAMPLING, 42, 0, {"response_format": {"type": "json_object"}}),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


def test_cache_round_trip_and_request_log(tmp_path):
    cache = RequestCache(tmp_path / "c.sqlite")
    assert cache.get("k") is None
    cache.put("k", "m@1", {"text": "hello", "status": "ok"})
    assert cache.get("k") == {"text": "hello", "status": "ok"}
    cache.log_request("run1", "m@1", "agent", "k", "ok", 10, 5, 0.1)
    cache.log_request("run1", "m@1", "judge", "k2", "failed", 0, 0, 0.1)
    cache.log_request("run2", "m@1", "agent", "k3", "ok", 10, 5, 0.1)
    assert cache.request_counts("run1") == {"agent": {"ok": 1}, "judge": {"failed": 1}}


def test_cache_is_safe_for_concurrent_writers(tmp_path):
    path = tmp_path / "c.sqlite"

    def writer(i: int) -> None:
        cache = RequestCache(path)
        for j in range(50):
            cache.put(f"{i}-{j}", "m", {"text": str(j)})

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(RequestCache(path)) == 200
