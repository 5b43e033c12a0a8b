"""The one LALR grammar of the three selector languages (label constraints, metric
constraints, label selectors), and how its terminals are named in error messages.

A table, kept apart from the code that builds objects from it (``terms``).
"""

from __future__ import annotations

import re

# A keyword only counts as one when no name character follows ("notable" is a value).
KW = r"(?![-A-Za-z0-9_.])"

GRAMMAR = rf"""
// ---- label constraints
label_constraint: KEY _label_eq value               -> label_eq
                | KEY _label_ne value               -> label_ne
                | KEY _IN value_list                -> label_in
                | KEY _NOT_IN value_list            -> label_not_in

// ---- metric constraints
metric_constraint: NAME _metric_eq number           -> metric_eq
                 | NAME _metric_ne number           -> metric_ne
                 | NAME (_W_GT | _GT) number        -> metric_gt
                 | NAME (_W_GE | _GE | _GE2) number -> metric_ge
                 | NAME (_W_LT | _LT) number        -> metric_lt
                 | NAME (_W_LE | _LE | _LE2) number -> metric_le
                 | NAME _IN number_list             -> metric_in
                 | NAME _NOT_IN number_list         -> metric_not_in

// ---- label selectors
selector: [requirement (_COMMA requirement)*]
requirement: KEY                                    -> sel_exists
           | _BANG KEY                              -> sel_not_exists
           | KEY (_EQ | _EQEQ) [value]              -> sel_eq
           | KEY _NE [value]                        -> sel_ne
           | KEY _IN value_list                     -> sel_in
           | KEY (_NOTIN | _NOT_IN) value_list      -> sel_not_in

// ---- shared pieces
// Separate rules per language: shared ones would merge LALR states, and the contextual
// lexer of a merged state would accept both a label value and a number there.
_label_eq: _IS | _EQ | _EQEQ
_label_ne: _IS_NOT | _NE
_metric_eq: _IS | _EQ | _EQEQ
_metric_ne: _IS_NOT | _NE
value_list: _LPAR value (_COMMA value)* [_COMMA] _RPAR
number_list: _LPAR number (_COMMA number)* [_COMMA] _RPAR
value: BARE | STRING
number: NUMBER

// Multi-word operators are single terminals (fewer tokens, faster); the longer
// spelling gets the higher priority because the lexer takes the first match.
_IS.2: /is{KW}/i
_IS_NOT.3: /is\s+not{KW}/i
_IN.2: /in{KW}/i
_NOT_IN.3: /not\s+in{KW}/i
_NOTIN.2: /notin{KW}/i
_W_GT.2: /(?:gt|greater\s+than){KW}/i
_W_GE.3: /(?:gte|greater\s+than\s+or\s+equal){KW}/i
_W_LT.2: /(?:lt|less\s+than){KW}/i
_W_LE.3: /(?:lte|less\s+than\s+or\s+equal){KW}/i
_EQ: "="
_EQEQ: "=="
_NE: "!="
_GT: ">"
_GE: ">="
_GE2: "=>"
_LT: "<"
_LE: "<="
_LE2: "=<"
_BANG: "!"
_LPAR: "("
_RPAR: ")"
_COMMA: ","

// Keys, names and values are lexed liberally and validated afterwards, for better messages.
KEY: /[A-Za-z0-9_.\-\/]+/
NAME: /[A-Za-z0-9_.\-:]+/
BARE: /[A-Za-z0-9_.\-]+/
STRING: /"(?:[^"\\]|\\.)*"/s | /'(?:[^'\\]|\\.)*'/s
NUMBER: /[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?{KW}/

%ignore /\s+/
"""

# How terminals are named in error messages, in the order they are listed.
DISPLAY: dict[str, str] = {
    "_IS": "is",
    "_EQ": "=",
    "_EQEQ": "==",
    "_IS_NOT": "is not",
    "_NE": "!=",
    "_IN": "in",
    "_NOT_IN": "not in",
    "_NOTIN": "notin",
    "_W_GT": "greater than, gt",
    "_GT": ">",
    "_W_GE": "greater than or equal, gte",
    "_GE": ">=",
    "_GE2": "=>",
    "_W_LT": "less than, lt",
    "_LT": "<",
    "_W_LE": "less than or equal, lte",
    "_LE": "<=",
    "_LE2": "=<",
    "_BANG": "!",
    "_LPAR": "'('",
    "_RPAR": "')'",
    "_COMMA": "','",
    "KEY": "a label key",
    "NAME": "a metric name",
    "BARE": "a value",
    "STRING": "a value",
    "NUMBER": "a number",
    "$END": "end of input",
}
DISPLAY_ORDER = {name: index for index, name in enumerate(DISPLAY)}

WORD = re.compile(r"""[-A-Za-z0-9_./:]+|"[^"]*"?|'[^']*'?|\S""")
