"""The DynamoDB request-rule checker: well-formed requests pass, each kind of violation is named."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.dynamo_rules import RESERVED_WORDS, _item_size, check_request

T = "hexeract-schedules"
KEY = {"schedule_id": {"S": "0190a8e2-0000-7000-8000-000000000001"}}


def s(v: str) -> dict[str, Any]:
    return {"S": v}


def n(v: int | str) -> dict[str, Any]:
    return {"N": str(v)}


def update(**over: Any) -> dict[str, Any]:
    """A well-formed conditional UpdateItem, shaped like the store's claim."""
    params: dict[str, Any] = {
        "TableName": T,
        "Key": KEY,
        "UpdateExpression": "SET attempts = attempts + :one, leased_until = :until REMOVE lease_token",
        "ConditionExpression": "#st = :pending AND (attribute_not_exists(leased_until) OR leased_until <= :now)",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": {":one": n(1), ":until": n(5), ":pending": s("pending"), ":now": n(4)},
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    params.update(over)
    return {k: v for k, v in params.items() if v is not None}


def only(problems: list[str], *needles: str) -> None:
    """Exactly one problem, naming every needle."""
    assert len(problems) == 1, problems
    for needle in needles:
        assert needle in problems[0], problems


WELL_FORMED: list[tuple[str, dict[str, Any]]] = [
    ("GetItem", {"TableName": T, "Key": KEY, "ConsistentRead": True}),
    (
        "GetItem",
        {
            "TableName": T,
            "Key": KEY,
            "ProjectionExpression": "schedule_id, #st",
            "ExpressionAttributeNames": {"#st": "status"},
        },
    ),
    (
        "PutItem",
        {
            "TableName": T,
            "Item": {**KEY, "status": s("pending"), "payload": {"B": b"{}"}, "attempts": n(0), "note": s("")},
            "ConditionExpression": "attribute_not_exists(schedule_id)",
            "ReturnValues": "ALL_OLD",
        },
    ),
    ("UpdateItem", update()),
    (
        "DeleteItem",
        {
            "TableName": T,
            "Key": KEY,
            "ConditionExpression": "lease_token = :t",
            "ExpressionAttributeValues": {":t": s("x")},
        },
    ),
    (
        "Query",
        {
            "TableName": T,
            "IndexName": "due-index",
            "KeyConditionExpression": "due_shard = :s AND due_at <= :t",
            "FilterExpression": "contains(tags, :tag) AND size(payload) BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {":s": s("0"), ":t": n(9), ":tag": s("a"), ":lo": n(1), ":hi": n(9)},
            "Limit": 1,
        },
    ),
    (
        "Scan",
        {
            "TableName": T,
            "FilterExpression": "NOT begins_with(target, :p)",
            "ExpressionAttributeValues": {":p": s("sqs")},
        },
    ),
    (
        "BatchGetItem",
        {
            "RequestItems": {
                T: {
                    "Keys": [{"schedule_id": s(f"k{i}")} for i in range(100)],
                    "ProjectionExpression": "#st",
                    "ExpressionAttributeNames": {"#st": "status"},
                }
            }
        },
    ),
    ("BatchWriteItem", {"RequestItems": {T: [{"PutRequest": {"Item": KEY}}, {"DeleteRequest": {"Key": KEY}}] * 12}}),
    (
        "TransactWriteItems",
        {
            "TransactItems": [
                {
                    "ConditionCheck": {
                        "TableName": T,
                        "Key": KEY,
                        "ConditionExpression": "attribute_exists(schedule_id)",
                    }
                },
                {"Update": {k: v for k, v in update().items() if not k.startswith("ReturnValues")}},
                {"Put": {"TableName": "other", "Item": {"schedule_id": s("y")}}},
            ]
        },
    ),
    ("TransactGetItems", {"TransactItems": [{"Get": {"TableName": T, "Key": KEY}}] * 100}),
    ("CreateTable", {"TableName": T, "KeySchema": [{"AttributeName": "schedule_id", "KeyType": "HASH"}]}),
    ("DescribeTable", {"TableName": T}),
]


@pytest.mark.parametrize(
    ("operation", "params"), WELL_FORMED, ids=[f"{op}-{i}" for i, (op, _) in enumerate(WELL_FORMED)]
)
def test_well_formed_requests_pass(operation: str, params: dict[str, Any]) -> None:
    assert check_request(operation, params) == []


def test_reserved_word_list_is_the_documented_one() -> None:
    assert len(RESERVED_WORDS) == 573
    assert {"STATUS", "NAME", "DATE", "COUNT", "DATA", "TTL", "ABORT", "ZONE", "SIZE"} <= RESERVED_WORDS


# -- placeholder maps ----------------------------------------------------------------------------


def test_the_historical_bug_empty_expression_attribute_names_is_flagged() -> None:
    # _fenced sent this when its expressions used no #st: moto accepted it, DynamoDB did not.
    params = update(
        UpdateExpression="SET due_at = :t REMOVE lease_token",
        ConditionExpression="lease_token = :tok",
        ExpressionAttributeNames={},
        ExpressionAttributeValues={":t": n(1), ":tok": s("x")},
    )
    only(check_request("UpdateItem", params), "ExpressionAttributeNames", "empty")


def test_empty_expression_attribute_values_is_flagged() -> None:
    params = {"TableName": T, "Key": KEY, "UpdateExpression": "REMOVE x", "ExpressionAttributeValues": {}}
    only(check_request("UpdateItem", params), "ExpressionAttributeValues", "empty")


@pytest.mark.parametrize(
    ("over", "needles"),
    [
        ({"ExpressionAttributeNames": {"#st": "status", "#x": "x"}}, ("unused", "#x", "ExpressionAttributeNames")),
        ({"ExpressionAttributeValues": {**update()["ExpressionAttributeValues"], ":v": n(1)}}, ("unused", ":v")),
        ({"ConditionExpression": "#st = :pending AND #other = :now"}, ("#other", "not in ExpressionAttributeNames")),
        (
            {"UpdateExpression": "SET attempts = :two, leased_until = :until"},
            (":two", "not in ExpressionAttributeValues"),
        ),
    ],
    ids=["unused-name", "unused-value", "undefined-name", "undefined-value"],
)
def test_placeholders_must_be_defined_and_used(over: dict[str, Any], needles: tuple[str, ...]) -> None:
    problems = check_request("UpdateItem", update(**over))
    if "UpdateExpression" in over:  # :one is no longer used either
        assert any(":one" in p and "unused" in p for p in problems)
        problems = [p for p in problems if ":one" not in p]
    only(problems, *needles)


def test_a_placeholder_used_only_in_the_projection_counts_as_used() -> None:
    params = {
        "TableName": T,
        "Key": KEY,
        "ProjectionExpression": "#d.#e",
        "ExpressionAttributeNames": {"#d": "d", "#e": "e"},
    }
    assert check_request("GetItem", params) == []


def test_values_on_a_get_are_unused() -> None:
    params = {"TableName": T, "Key": KEY, "ExpressionAttributeValues": {":v": n(1)}}
    only(check_request("GetItem", params), "unused", ":v")


def test_placeholders_are_checked_per_batch_get_table_entry() -> None:
    params = {
        "RequestItems": {
            "a": {"Keys": [KEY], "ProjectionExpression": "#st", "ExpressionAttributeNames": {"#st": "status"}},
            "b": {"Keys": [KEY], "ProjectionExpression": "x", "ExpressionAttributeNames": {"#st": "status"}},
        }
    }
    only(check_request("BatchGetItem", params), "RequestItems[b]", "unused", "#st")


def test_placeholders_are_checked_per_transact_action() -> None:
    # #st is defined in the first action only: the second cannot borrow it.
    params = {
        "TransactItems": [
            {"Update": {k: v for k, v in update().items() if not k.startswith("ReturnValues")}},
            {"ConditionCheck": {"TableName": T, "Key": KEY, "ConditionExpression": "attribute_exists(#st)"}},
        ]
    }
    only(check_request("TransactWriteItems", params), "TransactItems[1].ConditionCheck", "#st", "not in")
    get = {"TransactItems": [{"Get": {"TableName": T, "Key": KEY, "ExpressionAttributeNames": {"#a": "a"}}}]}
    only(check_request("TransactGetItems", get), "TransactItems[0].Get", "unused", "#a")


# -- reserved words ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "params", "word"),
    [
        (
            "UpdateItem",
            update(ConditionExpression="Status = :pending AND due_at <= :now", ExpressionAttributeNames=None),
            "Status",
        ),
        ("UpdateItem", update(UpdateExpression="SET attempts = :one, leased_until = :until, ttl = :now"), "ttl"),
        ("GetItem", {"TableName": T, "Key": KEY, "ProjectionExpression": "schedule_id, name"}, "name"),
        ("GetItem", {"TableName": T, "Key": KEY, "ProjectionExpression": "meta.data"}, "data"),
        ("GetItem", {"TableName": T, "Key": KEY, "ProjectionExpression": "runs[0].count"}, "count"),
        ("GetItem", {"TableName": T, "Key": KEY, "ProjectionExpression": "a.size"}, "size"),
        (
            "Query",
            {"TableName": T, "KeyConditionExpression": "date = :d", "ExpressionAttributeValues": {":d": n(1)}},
            "date",
        ),
        ("Scan", {"TableName": T, "FilterExpression": "attribute_exists(comment)"}, "comment"),
    ],
    ids=[
        "condition",
        "update",
        "projection",
        "after-dot",
        "after-index",
        "size-as-attribute",
        "key-condition",
        "in-function",
    ],
)
def test_reserved_words_as_bare_attribute_names_are_flagged(operation: str, params: dict[str, Any], word: str) -> None:
    only(check_request(operation, params), "reserved word", repr(word))


def test_functions_and_keywords_are_not_attribute_names() -> None:
    params = {
        "TableName": T,
        "FilterExpression": (
            "attribute_exists(a) and attribute_not_exists(b) OR NOT attribute_type(c, :t) AND begins_with(d, :t) "
            "AND contains(e, :t) AND size(f) BETWEEN :lo AND :hi AND g IN (:lo, :hi) AND h <> :t"
        ),
        "ExpressionAttributeValues": {":t": s("S"), ":lo": n(1), ":hi": n(2)},
    }
    assert check_request("Scan", params) == []
    upd = {
        "TableName": T,
        "Key": KEY,
        "UpdateExpression": "set l = list_append(if_not_exists(l, :e), :e) remove r add c :one delete ss :e",
        "ExpressionAttributeValues": {":e": {"L": []}, ":one": n(1)},
    }
    assert check_request("UpdateItem", upd) == []


def test_an_unparsable_character_is_reported() -> None:
    params = update(ConditionExpression="#st = 'pending'")
    problems = check_request("UpdateItem", params)
    assert any("unexpected character" in p and "ConditionExpression" in p for p in problems), problems


# -- update expressions ----------------------------------------------------------------------------


def test_a_clause_keyword_may_appear_only_once() -> None:
    params = update(UpdateExpression="SET attempts = :one REMOVE lease_token SET leased_until = :until")
    only(check_request("UpdateItem", params), "SET clause appears 2 times")


@pytest.mark.parametrize(
    ("expression", "names", "overlap"),
    [
        ("SET leased_until = :until, leased_until = :one", None, "leased_until and leased_until"),
        ("SET leased_until = :until, attempts = :one REMOVE attempts", None, "attempts and attempts"),
        ("SET m = :one, attempts = :until REMOVE m.child", None, "m and m.child"),
        ("SET l[1] = :one, attempts = :until REMOVE l", None, "l[1] and l"),
        ("SET #a = :one, attempts = :until REMOVE lease", {"#st": "status", "#a": "lease"}, "lease and lease"),
    ],
    ids=["same-set", "set-and-remove", "parent-child", "list-element", "through-placeholder"],
)
def test_overlapping_document_paths_are_flagged(expression: str, names: dict[str, str] | None, overlap: str) -> None:
    params = update(UpdateExpression=expression, **({"ExpressionAttributeNames": names} if names else {}))
    only(check_request("UpdateItem", params), "two document paths overlap", overlap)


def test_sibling_paths_do_not_overlap() -> None:
    params = update(UpdateExpression="SET m.a = :one, m.b = :until, l[0] = :one, l[1] = :until")
    assert check_request("UpdateItem", params) == []


@pytest.mark.parametrize(
    ("expression", "names", "clause"),
    [
        ("SET schedule_id = :one, attempts = :until", {"#st": "status"}, "SET"),
        ("SET attempts = :one, leased_until = :until REMOVE schedule_id", {"#st": "status"}, "REMOVE"),
        ("SET #k = :one, leased_until = :until", {"#st": "status", "#k": "schedule_id"}, "SET"),
    ],
    ids=["set", "remove", "through-placeholder"],
)
def test_key_attributes_cannot_be_updated(expression: str, names: dict[str, str], clause: str) -> None:
    problems = check_request("UpdateItem", update(UpdateExpression=expression, ExpressionAttributeNames=names))
    only(problems, f"{clause} on key attribute 'schedule_id'")


def test_key_attributes_can_be_named_for_another_table() -> None:
    params = update(UpdateExpression="SET sk = :one, leased_until = :until", Key={"pk": s("a"), "sk": s("b")})
    only(check_request("UpdateItem", params, key_attributes=("pk", "sk")), "key attribute 'sk'")
    assert check_request("UpdateItem", update()) == []


def test_projection_paths_must_not_overlap() -> None:
    params = {"TableName": T, "Key": KEY, "ProjectionExpression": "a, b, a.c"}
    only(check_request("GetItem", params), "ProjectionExpression", "overlap", "a and a.c")


# -- sizes and values ----------------------------------------------------------------------------------


def test_expressions_are_at_most_4_kb() -> None:
    long_path = ".".join(["attr"] * 900)  # 4499 bytes
    params = {"TableName": T, "Key": KEY, "ProjectionExpression": long_path}
    problems = check_request("GetItem", params)
    assert any("ProjectionExpression is 4499 bytes" in p and "4096" in p for p in problems), problems


def test_key_value_lengths() -> None:
    assert check_request("GetItem", {"TableName": T, "Key": {"schedule_id": s("é" * 1024)}}) == []  # 2048 bytes
    only(check_request("GetItem", {"TableName": T, "Key": {"schedule_id": s("x" * 2049)}}), "2049 bytes", "2048")
    pk_sk = {"TableName": T, "Key": {"pk": s("a"), "sk": {"B": b"x" * 1025}}}
    only(check_request("GetItem", pk_sk, key_attributes=("pk", "sk")), "'sk' is 1025 bytes", "1024")


def test_key_values_must_not_be_empty() -> None:
    only(check_request("DeleteItem", {"TableName": T, "Key": {"schedule_id": s("")}}), "empty string")
    put = {"TableName": T, "Item": {"schedule_id": {"B": b""}, "note": s(""), "blob": {"B": b""}}}
    only(check_request("PutItem", put), "'schedule_id'", "empty binary")
    batch = {"RequestItems": {T: [{"PutRequest": {"Item": {"schedule_id": s("")}}}]}}
    only(check_request("BatchWriteItem", batch), "RequestItems[hexeract-schedules][0].PutRequest", "empty string")


def test_item_size_follows_the_documented_formula() -> None:
    # The guide's example: "shirt-color" = "R" and "shirt-size" = "M" make 23 bytes.
    assert _item_size({"shirt-color": s("R"), "shirt-size": s("M")}) == 23
    assert _item_size({"n": n("0123.4500")}) == 1 + 3 + 1  # 5 significant digits: 3 bytes, + 1
    assert _item_size({"b": {"BOOL": True}, "z": {"NULL": True}}) == 4
    assert _item_size({"l": {"L": [s("ab"), n(7)]}}) == 1 + 3 + (1 + 2) + (1 + 2)
    assert _item_size({"m": {"M": {"k": s("v")}}}) == 1 + 3 + (1 + 1 + 1)


def test_items_are_at_most_400_kb() -> None:
    fits = {"TableName": T, "Item": {**KEY, "p": {"B": b"x" * (400 * 1024 - 100)}}}
    assert check_request("PutItem", fits) == []
    too_big = {"TableName": T, "Item": {**KEY, "p": {"B": b"x" * (400 * 1024)}}}
    only(check_request("PutItem", too_big), "Item is about", "400 KB")


@pytest.mark.parametrize(
    ("number", "ok"),
    [
        ("12345678901234567890123456789012345678", True),
        ("0.0000012345678901234567890123456789012345678000", True),
        ("-1E-130", True),
        ("123456789012345678901234567890123456789", False),
        ("1E+126", False),
        ("abc", False),
        ("NaN", False),
    ],
)
def test_numbers_have_at_most_38_digits_within_range(number: str, ok: bool) -> None:
    params = {"TableName": T, "Item": {**KEY, "v": n(number)}}
    problems = check_request("PutItem", params)
    assert (problems == []) is ok, problems
    if not ok:
        only(problems, "Item[v]", number)


@pytest.mark.parametrize("kind", ["SS", "NS", "BS"])
def test_sets_must_not_be_empty(kind: str) -> None:
    put = {"TableName": T, "Item": {**KEY, "tags": {kind: []}}}
    only(check_request("PutItem", put), "Item[tags]", f"empty {kind} set")
    nested = {"TableName": T, "Item": {**KEY, "doc": {"M": {"l": {"L": [{kind: []}]}}}}}
    only(check_request("PutItem", nested), "Item[doc]", "empty")
    value = update(UpdateExpression="ADD tags :t", ConditionExpression=None, ExpressionAttributeNames=None)
    value["ExpressionAttributeValues"] = {":t": {kind: []}}
    only(check_request("UpdateItem", value), "ExpressionAttributeValues[:t]", "empty")


def test_limit_is_at_least_1() -> None:
    query = next(params for op, params in WELL_FORMED if op == "Query")
    only(check_request("Query", {**query, "Limit": 0}), "Limit=0")
    only(check_request("Scan", {"TableName": T, "Limit": -1}), "Limit=-1")


def test_batch_and_transaction_sizes() -> None:
    keys = {
        "RequestItems": {
            t: {"Keys": [{"schedule_id": s(f"k{i}")} for i in range(c)]} for t, c in (("a", 60), ("b", 41))
        }
    }
    only(check_request("BatchGetItem", keys), "101 keys", "100")
    writes = {"RequestItems": {"a": [{"DeleteRequest": {"Key": KEY}}] * 20, "b": [{"DeleteRequest": {"Key": KEY}}] * 6}}
    only(check_request("BatchWriteItem", writes), "26 requests", "25")
    check = {"ConditionCheck": {"TableName": T, "Key": KEY, "ConditionExpression": "attribute_exists(schedule_id)"}}
    only(check_request("TransactWriteItems", {"TransactItems": [check] * 101}), "101 actions", "100")
    gets = {"TransactItems": [{"Get": {"TableName": T, "Key": KEY}}] * 101}
    only(check_request("TransactGetItems", gets), "101 actions")


def test_a_batch_get_asks_for_each_key_once_and_for_at_least_one() -> None:
    twice = {"RequestItems": {"a": {"Keys": [KEY, {"schedule_id": s("other")}, KEY]}, "b": {"Keys": [KEY]}}}
    only(check_request("BatchGetItem", twice), "RequestItems[a]", "duplicates")
    binary = {"RequestItems": {"a": {"Keys": [{"k": {"B": b"x"}}, {"k": {"B": b"x"}}]}}}
    only(check_request("BatchGetItem", binary, ("k",)), "duplicates")
    same_text_other_type = {"RequestItems": {"a": {"Keys": [{"k": {"B": b"1"}}, {"k": {"S": "1"}}]}}}
    assert check_request("BatchGetItem", same_text_other_type, ("k",)) == []
    only(check_request("BatchGetItem", {"RequestItems": {"a": {"Keys": []}}}), "RequestItems[a]", "no Keys")


# -- parameters ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "value", "ok"),
    [
        ("PutItem", "ALL_OLD", True),
        ("PutItem", "ALL_NEW", False),
        ("DeleteItem", "UPDATED_OLD", False),
        ("UpdateItem", "UPDATED_OLD", True),
        ("UpdateItem", "UPDATED_NEW", True),
        ("UpdateItem", "EVERYTHING", False),
    ],
)
def test_return_values_allowed_per_operation(operation: str, value: str, ok: bool) -> None:
    params = {"TableName": T, "Key": KEY, "ReturnValues": value}
    if operation == "PutItem":
        params = {"TableName": T, "Item": KEY, "ReturnValues": value}
    problems = check_request(operation, params)
    assert (problems == []) is ok, problems
    if not ok:
        only(problems, f"ReturnValues={value!r}", operation)


def test_return_values_on_condition_check_failure_is_all_old_or_none() -> None:
    assert check_request("UpdateItem", update(ReturnValuesOnConditionCheckFailure="NONE")) == []
    only(check_request("UpdateItem", update(ReturnValuesOnConditionCheckFailure="ALL_NEW")), "ALL_OLD or NONE")
    action = {"Delete": {"TableName": T, "Key": KEY, "ReturnValuesOnConditionCheckFailure": "UPDATED_OLD"}}
    only(check_request("TransactWriteItems", {"TransactItems": [action]}), "TransactItems[0].Delete", "ALL_OLD or NONE")


@pytest.mark.parametrize(
    ("operation", "param", "value"),
    [
        ("GetItem", "AttributesToGet", ["a"]),
        ("Query", "KeyConditions", {}),
        ("Query", "QueryFilter", {}),
        ("Scan", "ScanFilter", {}),
        ("PutItem", "Expected", {}),
        ("UpdateItem", "AttributeUpdates", {}),
        ("Scan", "ConditionalOperator", "AND"),
    ],
)
def test_legacy_parameters_are_flagged(operation: str, param: str, value: Any) -> None:
    params: dict[str, Any] = {"TableName": T, param: value}
    if operation == "Query":
        params["KeyConditionExpression"] = "schedule_id = :v"
        params["ExpressionAttributeValues"] = {":v": s("x")}
    only(check_request(operation, params), f"legacy parameter {param}")


def test_legacy_parameters_are_flagged_inside_batch_entries() -> None:
    params = {"RequestItems": {T: {"Keys": [KEY], "AttributesToGet": ["status"]}}}
    only(check_request("BatchGetItem", params), "RequestItems[hexeract-schedules]", "AttributesToGet")


def test_a_query_needs_a_key_condition_expression() -> None:
    params = {"TableName": T, "FilterExpression": "a = :v", "ExpressionAttributeValues": {":v": n(1)}}
    only(check_request("Query", params), "KeyConditionExpression")
