"""DynamoDB request rules that emulators skip: a pure-Python checker for the requests our code sends.

moto accepts requests that real DynamoDB rejects (an empty ``ExpressionAttributeNames={}`` passed moto and
broke production). ``check_request`` applies DynamoDB's documented request rules to one low-level client
call (botocore operation name + the kwargs as passed to boto3, attribute values in wire form) and returns
human-readable violations; an empty list means the request passes every rule here.

Sources (each rule below cites its own):
  DG  = Amazon DynamoDB Developer Guide, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/
  API = Amazon DynamoDB API Reference, https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/
        (the same text ships in botocore's dynamodb service-2.json)
Two rules are service-side ValidationExceptions the guide does not spell out; their comments quote the
message DynamoDB returns and name where it was observed against real AWS.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

# DG ReservedWords.html: "Don't use any of these words as attribute names in expressions. This list isn't
# case-sensitive." (573 words; extracted from dynalite's copy and checked word for word against the page.)
RESERVED_WORDS: frozenset[str] = frozenset(
    line.strip().upper()
    for line in (Path(__file__).parents[1] / "data" / "dynamodb_reserved_words.txt").read_text().splitlines()
    if line.strip()
)

EXPRESSIONS = (
    "KeyConditionExpression",
    "ConditionExpression",
    "FilterExpression",
    "UpdateExpression",
    "ProjectionExpression",
)
# DG Expressions.OperatorsAndFunctions.html; API UpdateItem: "These function names are case-sensitive."
FUNCTIONS = frozenset(
    {"attribute_exists", "attribute_not_exists", "attribute_type", "begins_with", "contains", "size"}
    | {"list_append", "if_not_exists"}
)
CONDITION_KEYWORDS = frozenset({"AND", "OR", "NOT", "BETWEEN", "IN"})
UPDATE_CLAUSES = frozenset({"SET", "REMOVE", "ADD", "DELETE"})

# DG LegacyConditionalParameters.html: "DynamoDB does not allow mixing legacy conditional parameters and
# expression parameters in a single call." Our code must use expressions only, so any legacy one is flagged.
LEGACY_PARAMETERS = {
    "AttributesToGet": "ProjectionExpression",
    "KeyConditions": "KeyConditionExpression",
    "QueryFilter": "FilterExpression",
    "ScanFilter": "FilterExpression",
    "Expected": "ConditionExpression",
    "AttributeUpdates": "UpdateExpression",
    "ConditionalOperator": "ConditionExpression",
}
# API PutItem / DeleteItem ReturnValues: "does not recognize any values other than NONE or ALL_OLD";
# API UpdateItem ReturnValues: NONE | ALL_OLD | UPDATED_OLD | ALL_NEW | UPDATED_NEW.
RETURN_VALUES = {
    "PutItem": frozenset({"NONE", "ALL_OLD"}),
    "DeleteItem": frozenset({"NONE", "ALL_OLD"}),
    "UpdateItem": frozenset({"NONE", "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"}),
}
# API ReturnValuesOnConditionCheckFailure: "Valid Values: ALL_OLD | NONE".
RETURN_ON_CONDITION_FAILURE = frozenset({"ALL_OLD", "NONE"})

# DG Constraints.html (Expression parameters): "The maximum length of any expression string is 4 KB."
MAX_EXPRESSION_BYTES = 4 * 1024
# DG Constraints.html (Partition keys and sort keys): partition key value 1..2048 bytes, sort key 1..1024.
MAX_PARTITION_KEY_BYTES = 2048
MAX_SORT_KEY_BYTES = 1024
# DG Constraints.html (Items): "The maximum item size in DynamoDB is 400 KB" (1 KB = 1024 bytes).
MAX_ITEM_BYTES = 400 * 1024
# DG Constraints.html (Data types, Number): "A Number can have up to 38 digits of precision"; positive range
# 1E-130 to 9.9999999999999999999999999999999999999E+125 (negative range mirrors it).
MAX_NUMBER_DIGITS = 38
MIN_NUMBER, MAX_NUMBER = Decimal("1E-130"), Decimal("9.9999999999999999999999999999999999999E+125")
# API BatchGetItem: "If you request more than 100 items, BatchGetItem returns a ValidationException".
# API BatchWriteItem: rejected when "There are more than 25 requests in the batch."
# API TransactWriteItems: "groups up to 100 action requests"; TransactGetItems: "up to 100 TransactGetItem".
MAX_BATCH_GET_KEYS, MAX_BATCH_WRITE_REQUESTS, MAX_TRANSACT_ITEMS = 100, 25, 100
# API BatchGetItem: "A single operation can retrieve up to 16 MB of data"; past that, or when throttled,
# the rest comes back in UnprocessedKeys, not as an error: the caller must ask for those keys again (no
# request rule can see it; the store's bounded retry is tested in tests/functional/test_table_layout.py).
# A request asking for one key twice is a ValidationException, "Provided list of item keys contains
# duplicates" (the service's message; moto and dynalite return it alike), and Keys holds 1 to 100 keys
# (API KeysAndAttributes, Keys: "Array Members: Minimum number of 1 item. Maximum number of 100 items.").

_TOKEN = re.compile(
    r"\s*(?:(?P<name>#[A-Za-z0-9_]+)|(?P<value>:[A-Za-z0-9_]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<index>\[\s*[0-9]+\s*\])|(?P<op><>|<=|>=|[=<>()+,.\-]))"
)
Token = tuple[str, str]
DocPath = tuple[str, ...]


def check_request(
    operation: str, params: Mapping[str, Any], key_attributes: Collection[str] = ("schedule_id",)
) -> list[str]:
    """Every documented DynamoDB rule ``params`` breaks for ``operation`` (empty list = fine).

    What the rules guard against, each a ValidationException on real DynamoDB that moto may let through:
    empty or half-used placeholder maps (a ``#name``/``:value`` undefined, or defined and never used);
    reserved words as bare attribute names; malformed update expressions (a clause twice, overlapping
    document paths, a key attribute changed); oversized expressions, keys and items; empty key strings and
    binaries, empty sets, numbers past 38 digits or DynamoDB's range; ``Limit`` below 1; batches and
    transactions past their item counts; a BatchGetItem with no key or a key twice;
    ``ReturnValues``/``ReturnValuesOnConditionCheckFailure`` values the operation does not accept; legacy
    parameters; a Query with no KeyConditionExpression.

    ``key_attributes`` names the table's key: the first is the partition key, a second one the sort key.
    Expression rules apply per request scope: the request itself, each table entry of a BatchGetItem, each
    put/delete of a BatchWriteItem, each action of a TransactWriteItems/TransactGetItems.
    """
    keys = tuple(key_attributes)
    problems = [p for where, scope in _scopes(operation, params) for p in _check_scope(where, scope, keys)]
    allowed = RETURN_VALUES.get(operation)
    if allowed is not None and "ReturnValues" in params and params["ReturnValues"] not in allowed:
        problems.append(f"ReturnValues={params['ReturnValues']!r} is not valid for {operation}: use {sorted(allowed)}")
    if "Limit" in params and params["Limit"] < 1:
        # API Query/Scan Limit: "Valid Range: Minimum value of 1."
        problems.append(f"Limit={params['Limit']!r}: DynamoDB requires Limit >= 1")
    if operation == "Query" and "KeyConditionExpression" not in params:
        # API Query: "You must provide the name of the partition key attribute and a single value for that
        # attribute"; with legacy KeyConditions ruled out, that is the KeyConditionExpression.
        problems.append("Query without KeyConditionExpression: a Query must test the partition key for equality")
    requests = params.get("RequestItems") or {}
    if operation == "BatchGetItem":
        count = sum(len(entry.get("Keys") or ()) for entry in requests.values())
        if count > MAX_BATCH_GET_KEYS:
            problems.append(f"BatchGetItem requests {count} keys; the limit is {MAX_BATCH_GET_KEYS}")
        for table, entry in requests.items():
            keys = [_key_identity(k) for k in entry.get("Keys") or ()]
            if not keys:
                problems.append(f"BatchGetItem RequestItems[{table}] has no Keys: at least 1 is required")
            if len(set(keys)) < len(keys):
                problems.append(
                    f"BatchGetItem RequestItems[{table}] asks for a key twice: DynamoDB rejects it "
                    "('Provided list of item keys contains duplicates')"
                )
    elif operation == "BatchWriteItem":
        count = sum(len(writes) for writes in requests.values())
        if count > MAX_BATCH_WRITE_REQUESTS:
            problems.append(f"BatchWriteItem holds {count} requests; the limit is {MAX_BATCH_WRITE_REQUESTS}")
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        count = len(params.get("TransactItems") or ())
        if count > MAX_TRANSACT_ITEMS:
            problems.append(f"{operation} holds {count} actions; the limit is {MAX_TRANSACT_ITEMS}")
    return problems


def _scopes(operation: str, params: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The parts of a request that carry their own expressions, placeholder maps, keys and items."""
    if operation == "BatchGetItem":
        for table, entry in (params.get("RequestItems") or {}).items():
            yield f"RequestItems[{table}]: ", entry
    elif operation == "BatchWriteItem":
        for table, writes in (params.get("RequestItems") or {}).items():
            for i, write in enumerate(writes):
                for kind, body in write.items():
                    yield f"RequestItems[{table}][{i}].{kind}: ", body
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        for i, action in enumerate(params.get("TransactItems") or ()):
            for kind, body in action.items():
                yield f"TransactItems[{i}].{kind}: ", body
    else:
        yield "", params


def _check_scope(where: str, scope: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """Placeholder maps, expressions, legacy parameters, keys, items and attribute values of one scope."""
    out: list[str] = []
    names: Mapping[str, str] = scope.get("ExpressionAttributeNames") or {}
    values: Mapping[str, Any] = scope.get("ExpressionAttributeValues") or {}
    for param in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        # Service ValidationException "ExpressionAttributeNames must not be empty" (likewise Values); not in the
        # guide, confirmed against AWS in getmoto/moto#4393 and awslabs/dynamodb-data-mapper-js#24.
        if param in scope and not scope[param]:
            out.append(f"{where}{param} is empty: DynamoDB rejects it ('{param} must not be empty'); omit it")
    used_names: set[str] = set()
    used_values: set[str] = set()
    for field in EXPRESSIONS:
        expr = scope.get(field)
        if expr is None:
            continue
        if len(expr.encode()) > MAX_EXPRESSION_BYTES:
            out.append(f"{where}{field} is {len(expr.encode())} bytes; the limit is {MAX_EXPRESSION_BYTES}")
        try:
            tokens = _tokenize(expr)
        except ValueError as exc:
            out.append(f"{where}{field}: {exc}")
            continue
        used_names |= {text for kind, text in tokens if kind == "name"}
        used_values |= {text for kind, text in tokens if kind == "value"}
        keywords = {"UpdateExpression": UPDATE_CLAUSES, "ProjectionExpression": frozenset()}.get(
            field, CONDITION_KEYWORDS
        )
        for path in _paths(tokens, keywords):
            for element in path:
                if element[0] not in "#[" and element.upper() in RESERVED_WORDS:
                    out.append(
                        f"{where}{field}: attribute name {element!r} is a DynamoDB reserved word; "
                        "refer to it through an ExpressionAttributeNames placeholder"
                    )
        if field == "UpdateExpression":
            out += [f"{where}{field}: {p}" for p in _check_update(tokens, names, keys)]
        if field == "ProjectionExpression":
            out += [f"{where}{field}: {p}" for p in _overlaps(_split_top_level(tokens, frozenset()), names)]
    # DG Expressions.ExpressionAttributeNames.html / ExpressionAttributeValues.html: a placeholder must be
    # defined ("An expression attribute name used in the document path is not defined"), and a defined one
    # must be used: "Value provided in ExpressionAttributeNames unused in expressions: keys: {#x}" (service
    # ValidationException, e.g. AllocZero/EfficientDynamoDb#170; dynalite and ExtendDB mirror it).
    for param, defined, used in (
        ("ExpressionAttributeNames", set(names), used_names),
        ("ExpressionAttributeValues", set(values), used_values),
    ):
        if used - defined:
            out.append(f"{where}placeholders {sorted(used - defined)} are used in expressions but not in {param}")
        if defined - used:
            out.append(
                f"{where}{param} defines {sorted(defined - used)}, unused in expressions: DynamoDB rejects this "
                f"('Value provided in {param} unused in expressions')"
            )
    for param, replacement in LEGACY_PARAMETERS.items():
        if param in scope:
            out.append(f"{where}legacy parameter {param}: use {replacement} (DynamoDB rejects legacy + expressions)")
    on_failure = scope.get("ReturnValuesOnConditionCheckFailure")
    if on_failure is not None and on_failure not in RETURN_ON_CONDITION_FAILURE:
        out.append(f"{where}ReturnValuesOnConditionCheckFailure={on_failure!r}: only ALL_OLD or NONE")
    key_maps = [scope["Key"]] if "Key" in scope else list(scope.get("Keys") or ())
    item: Mapping[str, Any] = scope.get("Item") or {}
    if item and _item_size(item) > MAX_ITEM_BYTES:
        out.append(f"{where}Item is about {_item_size(item)} bytes; the item size limit is {MAX_ITEM_BYTES} (400 KB)")
    for key in [*key_maps, {name: item[name] for name in keys if name in item}]:
        out += [f"{where}{p}" for p in _check_key(key, keys)]
    for label, attrs in (("Item", item), ("ExpressionAttributeValues", values), *(("Key", k) for k in key_maps)):
        for name, value in attrs.items():
            out += [f"{where}{label}[{name}]: {p}" for p in _value_problems(value)]
    return out


def _tokenize(expr: str) -> list[Token]:
    """Split an expression into (kind, text) tokens: name (#x), value (:x), word, index ([n]) and op."""
    tokens: list[Token] = []
    pos = 0
    while expr[pos:].strip():
        match = _TOKEN.match(expr, pos)
        if match is None or match.lastgroup is None:
            at = len(expr) - len(expr[pos:].lstrip())
            raise ValueError(f"unexpected character {expr[at]!r} at offset {at}")
        text = match.group(match.lastgroup)
        tokens.append((match.lastgroup, re.sub(r"\s+", "", text) if match.lastgroup == "index" else text))
        pos = match.end()
    return tokens


def _read_path(tokens: Sequence[Token], i: int) -> tuple[DocPath, int]:
    """The document path starting at ``tokens[i]``: an element, then any ``.element`` or ``[n]``."""
    path = [tokens[i][1]]
    i += 1
    while i < len(tokens):
        if tokens[i][0] == "index":
            path.append(tokens[i][1])
            i += 1
        elif tokens[i][1] == "." and i + 1 < len(tokens) and tokens[i + 1][0] in ("name", "word"):
            path.append(tokens[i + 1][1])  # after a dot every word is an attribute name, even "size"
            i += 2
        else:
            break
    return tuple(path), i


def _is_clause(tokens: Sequence[Token], i: int, keywords: Collection[str]) -> bool:
    """Whether ``tokens[i]`` is a keyword (a word after a dot is a path element, whatever it spells)."""
    return tokens[i][0] == "word" and tokens[i][1].upper() in keywords and (i == 0 or tokens[i - 1][1] != ".")


def _starts_path(tokens: Sequence[Token], i: int, keywords: Collection[str]) -> bool:
    """Whether ``tokens[i]`` begins an attribute path (not a keyword, not a function name before ``(``)."""
    kind, text = tokens[i]
    if kind == "name":
        return True
    if kind != "word" or text.upper() in keywords:
        return False
    return not (text in FUNCTIONS and i + 1 < len(tokens) and tokens[i + 1][1] == "(")


def _paths(tokens: Sequence[Token], keywords: Collection[str]) -> list[DocPath]:
    """Every attribute path an expression mentions."""
    paths: list[DocPath] = []
    i = 0
    while i < len(tokens):
        if _starts_path(tokens, i, keywords):
            path, i = _read_path(tokens, i)
            paths.append(path)
        else:
            i += 1
    return paths


def _split_top_level(tokens: Sequence[Token], keywords: Collection[str]) -> list[tuple[str, DocPath]]:
    """(clause, first path) of each action: actions are separated by top-level commas and clause keywords."""
    actions: list[tuple[str, DocPath]] = []
    clause, depth, expecting = "", 0, True
    for i, (_, text) in enumerate(tokens):
        if depth == 0 and _is_clause(tokens, i, keywords):
            clause, expecting = text.upper(), True
        elif text in ("(", ")"):
            depth += 1 if text == "(" else -1
        elif text == "," and depth == 0:
            expecting = True
        elif expecting and _starts_path(tokens, i, keywords):
            actions.append((clause, _read_path(tokens, i)[0]))
            expecting = False
    return actions


def _check_update(tokens: Sequence[Token], names: Mapping[str, str], keys: Sequence[str]) -> list[str]:
    """UpdateExpression structure: clauses once each, no overlapping targets, no key attribute touched."""
    out: list[str] = []
    clauses = [text.upper() for i, (_, text) in enumerate(tokens) if _is_clause(tokens, i, UPDATE_CLAUSES)]
    # DG Expressions.Modifying.html: "You can include any of these clauses in an update expression, in any
    # order. However, each action keyword can appear only once."
    for clause in sorted({c for c in clauses if clauses.count(c) > 1}):
        out.append(f"the {clause} clause appears {clauses.count(clause)} times; each may appear only once")
    actions = _split_top_level(tokens, UPDATE_CLAUSES)
    out += _overlaps(actions, names)
    # API AttributeValueUpdate / UpdateItem: "You cannot use UpdateItem to update any primary key attributes."
    for clause, path in actions:
        if _resolve(path, names)[0] in keys:
            out.append(f"{clause} on key attribute {_resolve(path, names)[0]!r}: key attributes cannot be updated")
    return out


def _overlaps(actions: Sequence[tuple[str, DocPath]], names: Mapping[str, str]) -> list[str]:
    """Pairs of paths where one equals or contains the other.

    Service ValidationException "Two document paths overlap with each other; must remove or rewrite one of
    these paths" (UpdateExpression and ProjectionExpression), e.g. aiodynamo#2, cyclic-software/dynamodb#1.
    """
    resolved = [_resolve(path, names) for _, path in actions]
    out = []
    for i, first in enumerate(resolved):
        for second in resolved[i + 1 :]:
            shorter = min(len(first), len(second))
            if first[:shorter] == second[:shorter]:
                out.append(f"two document paths overlap: {_render(first)} and {_render(second)}")
    return out


def _resolve(path: DocPath, names: Mapping[str, str]) -> DocPath:
    return tuple(names.get(element, element) if element.startswith("#") else element for element in path)


def _render(path: DocPath) -> str:
    return "".join(e if e.startswith("[") or i == 0 else "." + e for i, e in enumerate(path))


def _check_key(key: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """Key values: non-empty, and within the partition (2048 bytes) or sort key (1024 bytes) length limit.

    DG Constraints.html: "The minimum length of a partition key value is 1 byte. The maximum length is 2048
    bytes"; sort key "The maximum length is 1024 bytes". API PutItem: "Attribute values of type String and
    Binary must have a length greater than zero if the attribute is used as a key attribute".
    """
    out = []
    for name, value in key.items():
        kind, raw = next(iter(value.items()))
        if kind not in ("S", "B"):
            continue
        size = len(_raw_bytes(kind, raw))
        limit = MAX_SORT_KEY_BYTES if name in keys[1:] else MAX_PARTITION_KEY_BYTES
        if size == 0:
            out.append(f"key attribute {name!r} holds an empty {'string' if kind == 'S' else 'binary'}")
        elif size > limit:
            out.append(f"key attribute {name!r} is {size} bytes; the limit is {limit}")
    return out


def _value_problems(value: Mapping[str, Any]) -> list[str]:
    """Attribute value rules: no empty set (DG Constraints.html, Attributes: "empty Set ... not allowed";
    API PutItem "Set type attributes cannot be empty") and numbers of at most 38 digits within range."""
    kind, raw = next(iter(value.items()))
    if kind in ("SS", "NS", "BS") and not raw:
        return [f"empty {kind} set: DynamoDB rejects empty sets"]
    if kind == "N":
        return _number_problems(raw)
    if kind == "NS":
        return [p for n in raw for p in _number_problems(n)]
    if kind == "L":
        return [p for element in raw for p in _value_problems(element)]
    if kind == "M":
        return [p for element in raw.values() for p in _value_problems(element)]
    return []


def _significant_digits(number: str) -> int | None:
    """Significant digits of a number string (leading and trailing zeros trimmed), None if not a number."""
    try:
        parsed = Decimal(number)
    except (InvalidOperation, TypeError):
        return None
    if not parsed.is_finite():
        return None
    return len("".join(map(str, parsed.as_tuple().digits)).strip("0"))


def _number_problems(number: str) -> list[str]:
    digits = _significant_digits(number)
    if digits is None:
        return [f"{number!r} is not a number"]
    if digits > MAX_NUMBER_DIGITS:
        return [f"number {number} has {digits} significant digits; the limit is {MAX_NUMBER_DIGITS}"]
    if digits and not MIN_NUMBER <= abs(Decimal(number)) <= MAX_NUMBER:
        return [f"number {number} is outside DynamoDB's range (1E-130 to 9.99...E+125 in magnitude)"]
    return []


def _key_identity(key: Mapping[str, Any]) -> tuple[tuple[str, str, bytes], ...]:
    """A key as a comparable value: (attribute, type, bytes) for each of its attributes."""
    out = []
    for name, value in key.items():
        kind, raw = next(iter(value.items()))
        out.append((name, kind, _raw_bytes(kind, raw)))
    return tuple(sorted(out))


def _raw_bytes(kind: str, raw: Any) -> bytes:
    """The bytes DynamoDB measures: UTF-8 for strings, raw bytes for binaries (botocore encodes str as UTF-8)."""
    return raw.encode() if isinstance(raw, str) else bytes(raw)


def _value_size(value: Mapping[str, Any]) -> int:
    """Approximate stored size of an attribute value, per DG CapacityUnitCalculations.html ("DynamoDB item
    sizes and formats"): S = UTF-8 bytes; B = raw bytes; N ~ 1 byte per two significant digits + 1 byte;
    BOOL and NULL = 1 byte; List and Map = 3 bytes + the nested elements + 1 byte per element. A set is
    counted as the sum of its elements (the page gives no set overhead)."""
    kind, raw = next(iter(value.items()))
    if kind in ("S", "B"):
        return len(_raw_bytes(kind, raw))
    if kind == "N":
        return ((_significant_digits(raw) or 0) + 1) // 2 + 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: element}) for element in raw)
    if kind == "L":
        return 3 + sum(1 + _value_size(element) for element in raw)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + _value_size(element) for name, element in raw.items())
    return 1  # BOOL, NULL


def _item_size(item: Mapping[str, Any]) -> int:
    """Item size = sum over attributes of (UTF-8 length of the name + size of the value)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())
