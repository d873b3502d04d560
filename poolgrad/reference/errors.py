"""The one error type of the reference: bad input names its field and what is allowed."""


class SpecError(ValueError):
    """A pooling spec, array or option that the reference cannot accept.

    ``field`` names the offending key (as in a case file) so that callers such as the
    case-file loader can prefix the case id without re-parsing the message.
    """

    def __init__(self, field: str, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")
