"""Tools the LLM may call: kernel tools (``@tool``) and client tools (``ClientTool``).

A **kernel tool** is a Python function that runs in the kernel when the LLM
calls it; :func:`tool` builds its schema from the type hints and docstring. A
**client tool** is answered by the person at the notebook: the turn suspends,
a prompt appears, and the checked answer becomes the call's output. Three are
built in (:data:`BUILTIN_CLIENT_TOOLS`): ``ask_user`` (free text), ``choose``
(one of several options) and ``confirm`` (yes or no).

A client tool call goes: ``parse_arguments`` (what the LLM sent; errors go to
the LLM) → ``check_requirements`` → ``prompt`` (what the front end shows) →
the person answers → ``check_requirements`` again → ``parse_response`` (errors
go to the person, the call stays pending) → ``get_tool_output`` (what the LLM
reads). A custom client tool that asks for a rating from 1 to 5, which only
people granted the ``rate`` permission may give:

>>> from nbchat.tools import ClientTool, Requirement, ToolContext
>>> from nbchat import InvalidToolAnswer
>>> class Rate(ClientTool):
...     name = "rate"
...     description = "Ask the user to rate something from 1 (poor) to 5 (excellent)."
...     parameters = {
...         "type": "object",
...         "properties": {"subject": {"type": "string", "description": "what to rate"}},
...         "required": ["subject"],
...         "additionalProperties": False,
...     }
...
...     def call_requirements(self, arguments):
...         return [Requirement("rate", target=arguments["subject"])]
...
...     def prompt(self, arguments):
...         question = f"How good is {arguments['subject']}?"
...         return {"kind": "choice", "question": question, "options": ["1", "2", "3", "4", "5"]}
...
...     def parse_response(self, arguments, response):
...         if str(response).strip() not in ("1", "2", "3", "4", "5"):
...             raise InvalidToolAnswer(f"{response!r} is not a rating; answer 1, 2, 3, 4 or 5")
...         return int(response)
...
...     def output_description_instructions(self, arguments, answer):
...         return "The user gave this rating themselves: 1 is poor, 5 is excellent."
>>> rate = Rate()
>>> rate.parse_arguments('{"topic": "the summary"}')  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
nbchat.base.errors.InvalidToolArguments: invalid arguments for tool 'rate': missing required ...
>>> arguments = rate.parse_arguments('{"subject": "the summary"}')
>>> rate.check_requirements(ToolContext("ana", "ana", frozenset({"rate"})), arguments)
>>> rate.check_requirements(ToolContext("ana", "ana"), arguments)  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
nbchat.base.errors.ToolRequirementsNotMet: tool 'rate' needs permission 'rate' on 'the summary', ...
>>> rate.parse_response(arguments, "six")
Traceback (most recent call last):
  ...
nbchat.base.errors.InvalidToolAnswer: 'six' is not a rating; answer 1, 2, 3, 4 or 5
>>> print(rate.get_tool_output(arguments, rate.parse_response(arguments, " 4 ")))
<answer>
4
</answer>
<instructions>
The user gave this rating themselves: 1 is poor, 5 is excellent.
</instructions>
"""

from ._client import (
    BUILTIN_CLIENT_TOOLS,
    MAX_ANSWER_LENGTH,
    AskUser,
    Choose,
    ClientTool,
    Confirm,
    Requirement,
    ToolContext,
)
from ._kernel import Arguments, KernelTool, Tool, tool
from ._toolbox import Toolbox

__all__ = [
    "BUILTIN_CLIENT_TOOLS",
    "MAX_ANSWER_LENGTH",
    "Arguments",
    "AskUser",
    "Choose",
    "ClientTool",
    "Confirm",
    "KernelTool",
    "Requirement",
    "Tool",
    "ToolContext",
    "Toolbox",
    "tool",
]
