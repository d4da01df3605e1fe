"""Named checks for the reference scripts that test the import's pieces: each check
compares what it got with what it wanted, and the script's exit status says whether all
held."""


class Expectations:
    def __init__(self):
        self.checks, self.failures = [], []

    def expect(self, got, wanted, what):
        self.checks.append(what)
        if got != wanted:
            self.failures.append(f"{what}: got {got}, wanted {wanted}")

    def report(self):
        """Prints each failure and the count; the exit status (1 if any failed)."""
        for line in self.failures:
            print("FAIL", line)
        print(f"{len(self.checks) - len(self.failures)} of {len(self.checks)} checks hold")
        return 1 if self.failures else 0
