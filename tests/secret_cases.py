"""The environment-variable case table shared by the secrets tests (unit and processes).

Key-shaped values are assembled at run time from a seeded generator (no key-like literal
in the repository for scanners to flag); none of them is a real credential.
"""

from __future__ import annotations

import random
import string
import uuid

RNG = random.Random(7)


def rand_chars(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


B62 = rand_chars(40)
JWT = "eyJ" + rand_chars(20) + ".eyJ" + rand_chars(30) + "." + rand_chars(43)
PEM = (
    "-----BEGIN "
    + "RSA PRIVATE KEY-----\nMIIEow"
    + rand_chars(40)
    + "\n-----END RSA PRIVATE KEY-----"
)
SHA = "3f786850e387550fdab836ed7e6dc881de23001b"

# (name, value, dropped?)
TABLE: list[tuple[str, str, bool]] = [
    # secret by name, whatever the value
    ("OPENAI_API_KEY", "x", True),
    ("AGENTKIT_API_KEY", "x", True),
    ("AZURE_OPENAI_KEY", "abc", True),
    # the OTLP exporter's headers carry the collector's credentials; its endpoint does not
    ("OTEL_EXPORTER_OTLP_HEADERS", "x-api=abc", True),
    ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Basic%20abc", True),
    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", False),
    ("OPENAI_KEY", "abc", True),
    ("STRIPE_KEY", "abc", True),
    ("my_api_key", "abc", True),
    ("API_KEY", "abc", True),
    ("OPENAI_APIKEY", "abc", True),
    ("GITHUB_TOKEN", "abc", True),
    ("TOKEN", "abc", True),
    ("HF_TOKENS", "abc", True),
    ("GH_PAT", "abc", True),
    ("AZURE_DEVOPS_PAT", "abc", True),
    ("DB_PASSWORD", "hunter2", True),
    ("FTP_PASSWD", "hunter2", True),
    ("SMTP_PASS", "hunter2", True),
    ("MYSQL_PWD", "hunter2", True),
    ("GPG_PASSPHRASE", "words", True),
    ("SIGNING_SECRET", "abc", True),
    ("SECRET", "abc", True),
    ("CLIENT_SECRETS", "abc", True),
    ("SECRET_LOCATION", "abc", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/home/u/creds.json", True),
    ("DOCKER_CREDS", "abc", True),
    ("AWS_ACCESS_KEY_ID", "abc", True),
    ("AWS_SECRET_ACCESS_KEY", "abc", True),
    ("AWS_SESSION_TOKEN", "abc", True),
    ("NPM_CONFIG__AUTH", "abc", True),
    ("HTTP_AUTHORIZATION", "Bearer abc", True),
    ("SESSION_COOKIE", "abc", True),
    ("ssh.private-key", "abc", True),
    # secret by value under an innocent name
    ("DATABASE_URL", "postgres://u:pw@db.example/app", True),
    ("REDIS_URL", "redis://:pw@127.0.0.1:6379/0", True),
    ("HTTPS_PROXY", "http://user:pass@proxy.example:3128", True),
    ("GIT_REMOTE", "https://" + "ghp_" + rand_chars(36) + "@github.com/o/r.git", True),
    ("MY_SETTING", "sk-proj-" + rand_chars(40), True),
    ("ANTHROPIC", "sk-ant-api03-" + rand_chars(40), True),
    ("CONFIG", "ghp_" + rand_chars(36), True),
    ("X", "github_pat_" + rand_chars(22) + "_" + rand_chars(59), True),
    ("GL", "glpat-" + rand_chars(20), True),
    ("SLACK", "xoxb-" + rand_chars(12, string.digits) + "-" + rand_chars(24), True),
    ("AWS_ID", "AKIA" + rand_chars(16, string.ascii_uppercase + string.digits), True),
    ("GOOGLE", "AIza" + rand_chars(35), True),
    ("HUB", "hf_" + rand_chars(34), True),
    ("PAY", "sk_live_" + rand_chars(24), True),
    ("SESSION_DATA", JWT, True),
    ("CURL_OPTS", "-H 'Authorization: Bearer sk-" + rand_chars(48) + "'", True),
    ("BLOB", B62, True),
    ("AWS_STUFF", rand_chars(40, string.ascii_letters + string.digits + "+/"), True),
    ("DEPLOY", PEM, True),
    # ordinary variables: kept
    ("PATH", "/usr/local/bin:/usr/bin:/bin", False),
    ("HOME", "/home/u", False),
    ("LANG", "en_US.UTF-8", False),
    ("LC_ALL", "C.UTF-8", False),
    ("TERM", "xterm-256color", False),
    ("PYTHONPATH", "/work/src:/work/lib", False),
    ("VIRTUAL_ENV", "/work/.venv", False),
    ("CONDA_PREFIX", "/opt/conda/envs/myEnv2024py311AbcXyz0987654321", False),
    ("KEYBOARD_LAYOUT", "us", False),
    ("MONKEY", "banana", False),
    ("KEYS_DIR", "/etc/keys", False),
    ("SSH_AUTH_SOCK", "/tmp/ssh-XXXXabcd/agent.1234", False),
    ("GPG_KEY_ID", "ABCDEF0123456789", False),
    ("PWD", "/work", False),
    ("OLDPWD", "/tmp", False),
    ("AGENTKIT_TOKENIZER", "estimate", False),
    ("AGENTKIT_TIKTOKEN_TIMEOUT", "5", False),
    ("GITHUB_SHA", SHA, False),
    ("INVOCATION_ID", uuid.UUID(int=RNG.getrandbits(128)).hex, False),
    ("BUILD_UUID", str(uuid.UUID(int=RNG.getrandbits(128))), False),
    ("DATABASE_URL", "postgres://db.example/app", False),
    ("GIT_URL", "ssh://git@github.com/o/r.git", False),
    ("HTTP_PROXY", "http://proxy.example:3128", False),
    ("LS_COLORS", "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:do=01;35", False),
    ("DESK_DIR", "/home/u/desk-organizer-project-2024-final-version", False),
    ("TASK", "task-management-service-config-file-v2", False),
    ("NODE_OPTIONS", "--max-old-space-size=4096", False),
    ("CUDA_VISIBLE_DEVICES", "0,1", False),
    ("SHORT", "abc123XYZ", False),
]
