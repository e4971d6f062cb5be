"""``wrap(boto3.client("bedrock-runtime"))``: a real botocore client, managed, against a scripted endpoint.

botocore signs, serialises and parses for real (REST-JSON answers, the binary
event stream, ``ClientError`` from the status and ``x-amzn-ErrorType``); the
endpoint is a local server that plays the documented Converse shapes.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from scripted_http import Answer, Script, scripted_server
from toolbudget import CallReport, Policy, Session, UnsupportedClient, wrap
from toolbudget.recovery.output import continuation_prompt

botocore = pytest.importorskip("botocore")

MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"


def error(status: int, code: str, message: str) -> Answer:
    """An error as Bedrock sends it: a status, ``x-amzn-ErrorType`` and a JSON ``message``."""
    kind = {"x-amzn-errortype": f"{code}:http://internal.amazon.com/coral/"}
    return Answer(data={"message": message}, status=status, headers=kind)


OVERFLOW = error(
    400,
    "ValidationException",
    "The model returned the following errors: Input is too long for requested model.",
)


def client(url: str) -> Any:
    """A real botocore ``bedrock-runtime`` client aimed at ``url``, with dummy credentials, no retries."""
    import botocore.config
    import botocore.session

    return botocore.session.get_session().create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=url,
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def answer(text: str, stop: str) -> Answer:
    return Answer(
        data={
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": stop,
            "usage": {"inputTokens": 100, "outputTokens": 7, "totalTokens": 107},
            "metrics": {"latencyMs": 10},
        }
    )


def history(lines: int = 600) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": "Find the bug."}]}]
    for i in range(8):
        output = "".join(f"line {j} of result {i}: value={j * i}\n" for j in range(lines))
        messages.append(
            {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": f"t{i}", "name": "bash", "input": {"i": i}}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": f"t{i}", "content": [{"text": output}]}}],
            }
        )
    return messages


TOOLS = {"tools": [{"toolSpec": {"name": "bash", "inputSchema": {"json": {"type": "object"}}}}]}


def session(name: str) -> Session:
    return Session(name, store="memory:", policy=Policy(max_token_escalations=1))


def test_converse_recovers_escalates_continues_and_merges() -> None:
    script = Script(
        [
            OVERFLOW,
            answer("Once upon a ", "max_tokens"),
            answer("Once upon a time, ", "max_tokens"),
            answer("there was a flow.", "end_turn"),
        ]
    )
    reports: list[CallReport] = []
    messages = history()
    before = copy.deepcopy(messages)
    with scripted_server(script) as url, session("bedrock") as s:
        raw = client(url)
        bedrock = wrap(raw, session=s, on_report=reports.append)
        assert isinstance(bedrock, type(raw))  # botocore makes a class per client
        got = bedrock.converse(
            modelId=MODEL, messages=messages, toolConfig=TOOLS, inferenceConfig={"maxTokens": 64}
        )
    assert got["output"]["message"]["content"] == [{"text": "Once upon a time, there was a flow."}]
    assert got["stopReason"] == "end_turn"
    assert messages == before  # the caller's history is untouched
    sizes = [len(orjson.dumps(b)) for b in script.bodies]
    assert len(script.bodies) == 4 and sizes[1] < sizes[0]  # refused, then a smaller history
    assert all(p.startswith("/model/") and p.endswith("/converse") for p in script.paths)
    assert [b["inferenceConfig"]["maxTokens"] for b in script.bodies] == [64, 64, 128, 128]
    continued = script.bodies[3]["messages"]
    assert continued[-2] == {"role": "assistant", "content": [{"text": "Once upon a time, "}]}
    assert continued[-1]["content"][0]["text"] == continuation_prompt(False)
    assert "modelId" not in script.bodies[0]  # botocore put it in the path, as the API wants
    (report,) = reports
    assert report.recovered and (report.escalations, report.continuations) == (1, 1)


def test_a_cut_off_tool_call_is_never_returned_as_runnable() -> None:
    cut = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"text": "Reading."},
                    {"toolUse": {"toolUseId": "x", "name": "bash", "input": {}}},
                ],
            }
        },
        "stopReason": "max_tokens",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    script = Script([Answer(data=cut)])
    with (
        scripted_server(script) as url,
        Session("cut", store="memory:", policy=Policy(max_token_escalations=0)) as s,
    ):
        policy_free = wrap(client(url), session=s)
        got = policy_free.converse(modelId=MODEL, messages=history()[:1], inferenceConfig={"maxTokens": 8})
    content = got["output"]["message"]["content"]
    assert all("toolUse" not in block for block in content)
    assert got["stopReason"] == "max_tokens"


def test_an_error_that_is_not_an_overflow_is_botocores_own() -> None:
    script = Script([error(429, "ThrottlingException", "Too many tokens, please wait.")])
    with (
        scripted_server(script) as url,
        session("throttle") as s,
        pytest.raises(botocore.exceptions.ClientError) as info,
    ):
        wrap(client(url), session=s).converse(modelId=MODEL, messages=history()[:1])
    assert info.value.response["Error"]["Code"] == "ThrottlingException"
    assert len(script.bodies) == 1  # never retried by toolbudget


def stream_events(text: str, stop: str) -> list[dict[str, Any]]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": text}, "contentBlockIndex": 0}},
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": stop}},
        {
            "metadata": {
                "usage": {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8},
                "metrics": {"latencyMs": 1},
            }
        },
    ]


def test_converse_stream_is_recovered_before_its_first_event_and_watched_to_its_end() -> None:
    script = Script([OVERFLOW, Answer(events=stream_events("Once upon", "max_tokens"))])
    reports: list[CallReport] = []
    with scripted_server(script) as url, session("stream") as s:
        opened = wrap(client(url), session=s, on_report=reports.append).converse_stream(
            modelId=MODEL, messages=history(), toolConfig=TOOLS, inferenceConfig={"maxTokens": 64}
        )
        events = list(opened["stream"])
    assert [next(iter(e)) for e in events][:2] == ["messageStart", "contentBlockDelta"]
    assert all(p.endswith("/converse-stream") for p in script.paths) and len(script.bodies) == 2
    assert len(reports) == 1  # once, when the stream ended
    (report,) = reports
    assert report.recovered and report.stream_finished
    assert report.final_cutoff is not None and report.final_cutoff.reason == "max_tokens"
    assert opened["stream"].toolbudget_report is report


def test_count_tokens_counts_the_managed_conversation() -> None:
    script = Script([Answer(data={"inputTokens": 42})])
    messages = history(6000)  # results past the per-result cap
    with scripted_server(script) as url, session("count") as s:
        got = wrap(client(url), session=s).count_tokens(
            modelId=MODEL, input={"converse": {"messages": messages, "toolConfig": TOOLS}}
        )
    assert got["inputTokens"] == 42
    sent = script.bodies[0]["input"]["converse"]
    assert len(orjson.dumps(sent["messages"])) < len(orjson.dumps(messages))  # the budgets cut it
    assert "modelId" not in sent


def test_recall_adds_the_tool_once_and_invoke_model_with_messages_is_refused() -> None:
    script = Script([answer("ok", "end_turn")])
    with scripted_server(script) as url, session("recall") as s:
        bedrock = wrap(client(url), session=s, recall=True)
        bedrock.converse(modelId=MODEL, messages=history()[:1], toolConfig=TOOLS)
        with pytest.raises(UnsupportedClient, match="converse"):
            bedrock.invoke_model(modelId=MODEL, body=orjson.dumps({"messages": [], "max_tokens": 5}))
        with pytest.raises(UnsupportedClient, match="bidirectional"):
            _ = bedrock.invoke_model_with_bidirectional_stream
        assert bedrock.meta.service_model.service_name == "bedrock-runtime"  # the client's own
    names = [t["toolSpec"]["name"] for t in script.bodies[0]["toolConfig"]["tools"]]
    assert names == ["bash", "toolbudget_recall"]
    assert len(script.bodies) == 1  # the refused call sent nothing
