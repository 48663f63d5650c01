#!/usr/bin/env python3
"""The demo's Matrix step (BOXMAKER_MATRIX=1 ./scripts/demo.sh): a homeserver on loopback and
the owner's side of a chat with the box, with nothing but Python's standard library and the
Synapse of the cache (scripts/fetch-parts.sh synapse).

  matrix_demo.py homeserver DIR SECRET   start Synapse in DIR (config/synapse/ filled in),
                                         register `owner` and `box`, print the URL; its pid
                                         is in DIR/synapse.pid
  matrix_demo.py ask URL PASSWORD TEXT   as the owner: make a room, invite the box, wait for
                                         it to join, say TEXT, print the box's answer

Every wait is bounded; a failure says what did not happen and exits non-zero.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER_NAME = "localhost"
START_WAIT_S = 60
JOIN_WAIT_S = 60
# A real model on two cores answers within minutes.
ANSWER_WAIT_S = 600
POLL_S = 0.5


def fail(why):
    print(f"matrix_demo.py: {why}", file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, method="GET", body=None, token=None):
    """One client-server API call; its JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        fail(f"{method} {url}: {e.code} {e.read().decode(errors='replace')}")


def homeserver(directory, secret):
    directory = pathlib.Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    for name in ("homeserver.yaml", "log.yaml"):
        text = (ROOT / "config/synapse" / name).read_text()
        text = text.replace("@DIR@", str(directory)).replace("@PORT@", str(port))
        (directory / name).write_text(text.replace("@SECRET@", secret))
    config = str(directory / "homeserver.yaml")
    run = [sys.executable, "-m", "synapse.app.homeserver"]
    subprocess.run(run + ["--generate-missing-configs", "-c", config], check=True,
                   stdout=subprocess.DEVNULL)
    with open(directory / "stderr.log", "wb") as log:
        process = subprocess.Popen(run + ["-c", config], stdout=log, stderr=log,
                                   start_new_session=True)
    (directory / "synapse.pid").write_text(f"{process.pid}\n")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_WAIT_S
    while True:
        try:
            urllib.request.urlopen(f"{url}/_matrix/client/versions", timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                fail(f"Synapse did not answer within {START_WAIT_S} s; see {directory}")
            time.sleep(POLL_S)
    for user in ("owner", "box"):
        subprocess.run([sys.executable, "-m", "synapse._scripts.register_new_matrix_user",
                        "--no-admin", "-u", user, "-p", secret, "-k", secret, url],
                       check=True, stdout=subprocess.DEVNULL)
    print(url)


def ask(url, password, text):
    api = f"{url}/_matrix/client/v3"
    login = call(f"{api}/login", "POST", {
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": "owner"},
        "password": password,
    })
    token = login["access_token"]
    bot = f"@box:{SERVER_NAME}"
    room = call(f"{api}/createRoom", "POST", {"name": "the box", "invite": [bot]},
                token)["room_id"]
    quoted = urllib.parse.quote(room)
    deadline = time.monotonic() + JOIN_WAIT_S
    while bot not in call(f"{api}/rooms/{quoted}/joined_members", token=token)["joined"]:
        if time.monotonic() > deadline:
            fail(f"the box did not join {room} within {JOIN_WAIT_S} s (is chatd running?)")
        time.sleep(POLL_S)
    print(f"owner> {text}", flush=True)
    call(f"{api}/rooms/{quoted}/send/m.room.message/demo-{os.getpid()}", "PUT",
         {"msgtype": "m.text", "body": text}, token)
    deadline = time.monotonic() + ANSWER_WAIT_S
    while True:
        page = call(f"{api}/rooms/{quoted}/messages?dir=b&limit=50", token=token)
        answers = [e["content"].get("body", "") for e in page.get("chunk", [])
                   if e.get("sender") == bot and e.get("type") == "m.room.message"]
        if answers:
            print(f"box> {answers[0]}")
            return
        if time.monotonic() > deadline:
            fail(f"no answer from the box within {ANSWER_WAIT_S} s")
        time.sleep(POLL_S)


def main(args):
    if len(args) == 3 and args[0] == "homeserver":
        homeserver(args[1], args[2])
    elif len(args) == 4 and args[0] == "ask":
        ask(args[1], args[2], args[3])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
