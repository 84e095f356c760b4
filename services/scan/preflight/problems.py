"""What every pre-flight check returns: one problem, and the fix that the operator reads.

The checks of each source (`zk`, `s3`) build these; `checks` prints them and exits. They sit
below all of them so a check never imports the module that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    what: str
    fix: str

    @property
    def line(self) -> str:
        return f"pre-flight: {self.what}; {self.fix}"
