import urllib.request
import httpx


def test_live_server_uses_test_db(live_server_factory, django_user_model):
    django_user_model.objects.create_user(username="zed", password="x")
    server = live_server_factory(env={"CONN_MAX_AGE": "60"})
    assert urllib.request.urlopen(server.url + "/readyz").status == 200
    from django.db import connection
    with connection.cursor() as cur:
        cur.execute("SELECT datname, count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname IS NOT NULL GROUP BY datname")
        rows = dict(cur.fetchall())
    print(rows)
    assert rows.get(connection.settings_dict["NAME"], 0) >= 1


def test_live_server_default(live_server, user, other_user):
    r = httpx.post(live_server.url + "/api/copilotkit", json={"query": "{hello}"})
    assert r.json() == {"data": {"hello": "Hello World"}}
    assert user.username == "alice" and other_user.username == "bob"


def test_fake_upstream(fake_upstream):
    print(fake_upstream.base_url, fake_upstream.port, fake_upstream.stats())
    assert fake_upstream.requests() == []
