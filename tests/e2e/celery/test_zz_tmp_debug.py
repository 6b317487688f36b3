import httpx, time
from tests.support.client_capture import captured_generate_request
from tests.support.generate_e2e import generate_data, text_input, GRAPHQL_PATH

def test_debug(celery_stack, redis_url, fake_upstream):
    server, worker = celery_stack(redis_url)
    cr = captured_generate_request("1.10.6")
    data = generate_data(thread_id="t-dbg", messages=[text_input("u1", 'FAKE: {"tokens": 5}')])
    r = httpx.post(server.url + GRAPHQL_PATH, content=cr.body(data), headers=cr.request_headers(), timeout=20)
    print(r.status_code, r.text[:3000])
    time.sleep(1)
    print(server.stderr_text()[-5000:])
    print(worker.log_text()[-2000:])
    assert False
