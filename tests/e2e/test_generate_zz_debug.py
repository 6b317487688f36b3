import json, time, threading
import httpx
from tests.e2e.js_client import run_js
from tests.support.client_capture import captured_generate_request
from tests.support.generate_e2e import *

def test_debug(live_server_factory, fake_upstream):
    server = live_server_factory(env=server_env(fake_upstream.base_url, LOG_LEVEL="INFO"))
    fake_upstream.script({"hang": True})
    version = "1.10.6"
    cr = captured_generate_request(version)
    data = generate_data(thread_id="t-busy", messages=[text_input("u1", "x")])
    with httpx.Client(timeout=30) as h, h.stream("POST", server.url + GRAPHQL_PATH, content=cr.body(data), headers=cr.request_headers()) as held:
        got = b""
        for c in held.iter_raw():
            got += c
            if b'"runId"' in got: break
        print("GOT", got)
        t0 = time.monotonic()
        try:
            with httpx.Client(timeout=5) as c2, c2.stream("POST", server.url + GRAPHQL_PATH, content=cr.body(data), headers=cr.request_headers()) as r:
                print("SECOND", r.status_code, r.headers)
                for c in r.iter_raw():
                    print("CHUNK", time.monotonic() - t0, c)
        except Exception as e:
            print("SECOND EXC", repr(e), time.monotonic() - t0)
    time.sleep(1)
    print(server.stderr_text()[-3000:]); from conversations.models import Run; print(list(Run.objects.values("id","status","error_code")))
    assert False
