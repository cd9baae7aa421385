"""Unit tests of the rules: `python3 -m unittest` in this directory.

The cases are the Rust plugin's (`../deny-dangerous-bash/cases.json`), so both ports
keep the same rules.
"""

import json
import pathlib
import unittest

from danger import danger

CASES = json.loads(
    (pathlib.Path(__file__).parent / ".." / "deny-dangerous-bash" / "cases.json").read_text()
)


class DangerTest(unittest.TestCase):
    def test_dangerous_commands_are_caught(self):
        for c in CASES["deny"]:
            self.assertIsNotNone(danger(c), c)

    def test_ordinary_commands_pass(self):
        for c in CASES["allow"]:
            self.assertIsNone(danger(c), c)


if __name__ == "__main__":
    unittest.main()
