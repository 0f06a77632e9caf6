"""Search a string with a regex program in linear time: a lazily built DFA (sans-IO, pure).

:class:`LazyDfa` answers what ``re.search(source, s) is not None`` answers, for the programs of
:mod:`feds.regex_program`, reading each character of ``s`` once. Its states are sets of program
positions (the subset construction, as bit masks: bit ``pc``), built only when the input first
needs them and kept in a cache, so a warm search is one dictionary look-up per character.
Building one transition visits each instruction at most once (a kernel's character tests, taken
in one operation, count once more) and runs each one-character test at most once per
character, so a search costs at most ``3 * (len(s) + 1) * len(program)`` steps however the
regex is written (``work`` counts them): there is no backtracking.

A state is a *kernel* (the positions reached by the last character read) together with what
zero-width assertions need to know about that character (start of string, newline, word
character). The whole string is searched by adding the program's start to every kernel. The
last character takes its own transition table, since ``$`` also matches before a final newline.

The cache is bounded in proportion to the program (:data:`CACHE_ENTRIES_PER_INSTRUCTION`);
when full it is dropped and rebuilt as the input goes on, which costs time (still within the
bound above) but never memory.
"""

from __future__ import annotations

from typing import Final

from feds.regex_program import ASSERT, CHAR, FORK, JUMP, MATCH, Assertion, Program, char_features

__all__ = ["CACHE_ENTRIES_PER_INSTRUCTION", "LazyDfa"]

CACHE_ENTRIES_PER_INSTRUCTION: Final = 32
"""Cache entries (states, their kernel positions, transitions, a character's test results) a
matcher keeps per program instruction, plus a fixed 256, before it drops its cache."""


class _State:
    """A DFA state: a kernel and the assertion features of the character before it."""

    __slots__ = ("before", "end", "kernel", "last", "next")

    def __init__(self, kernel: int, before: int) -> None:
        self.kernel = kernel
        self.before = before
        self.next: dict[str, _State] = {}  # on a character that is not the string's last
        self.last: dict[str, bool] = {}  # on the string's last character: is there a match
        self.end: bool | None = None  # at the end of the string: is there a match


_ACCEPT: Final = _State(0, 0)  # reached as soon as a match is certain


class LazyDfa:
    """A regex program's searcher; ``work`` counts instruction visits (for tests)."""

    def __init__(self, program: Program, cache_entries: int | None = None) -> None:
        """``cache_entries`` overrides the cache's bound (by default in proportion to the
        program)."""
        self._program = program
        ops, args = program.ops, program.args
        self._chars = sum(1 << pc for pc, op in enumerate(ops) if op == CHAR)
        self._test_masks = [0] * len(program.tests)  # the CHAR instructions running each test
        for pc, op in enumerate(ops):
            if op == CHAR:
                self._test_masks[args[pc]] |= 1 << pc
        self._budget = cache_entries or 256 + CACHE_ENTRIES_PER_INSTRUCTION * len(program)
        self.work = 0
        self.resets = 0
        self._reset()

    def _reset(self) -> None:
        self._states: dict[tuple[int, int], _State] = {}
        self._passed: dict[str, int] = {}  # per character: the CHAR instructions it passes
        self._used = 0
        self._start = self._intern(0, Assertion.START)

    def search(self, s: str) -> bool:
        """Whether the regex matches somewhere in ``s``."""
        state = self._start
        if not s:
            return self._at_end(state)
        for ch in s[:-1]:
            after = state.next.get(ch) or self._step(state, ch)
            if after is _ACCEPT:
                return True
            state = after
        ch = s[-1]
        found = state.last.get(ch)
        return self._step_last(state, ch) if found is None else found

    def _step(self, state: _State, ch: str) -> _State:
        features = char_features(ch)
        kernel = self._advance(state, ch, features)
        after = _ACCEPT if kernel is None else self._intern(kernel, features)
        self._remember(state.next, ch, after)
        return after

    def _step_last(self, state: _State, ch: str) -> bool:
        features = char_features(ch)
        kernel = self._advance(state, ch, features | Assertion.LAST)
        found = kernel is None or self._closure(kernel, features, Assertion.END) is None
        self._remember(state.last, ch, found)
        return found

    def _at_end(self, state: _State) -> bool:
        if state.end is None:
            state.end = self._closure(state.kernel, state.before, Assertion.END) is None
        return state.end

    def _advance(self, state: _State, ch: str, after: int) -> int | None:
        """The kernel after reading ``ch`` (whose features are ``after``), or None if the
        program matches before it."""
        waiting = self._closure(state.kernel, state.before, after)
        if waiting is None:
            return None
        passed = self._passed.get(ch)
        if passed is None:
            passed = self._classify(ch)
        return (waiting & passed) << 1  # a CHAR instruction goes on to the next one

    def _classify(self, ch: str) -> int:
        """The CHAR instructions whose test ``ch`` passes (cached per character)."""
        passed = 0
        for test, mask in zip(self._program.tests, self._test_masks, strict=True):
            if test(ch) is not None:
                passed |= mask
        self.work += len(self._test_masks)
        self._spend(1)
        self._passed[ch] = passed
        return passed

    def _closure(self, kernel: int, before: int, after: int) -> int | None:
        """The CHAR instructions reachable without reading from the kernel and the start, at a
        position described by ``before``/``after``, as a bit mask; None if MATCH is reachable.

        Sets of instructions are bit masks (bit ``pc``), so the kernel's CHAR instructions,
        which reach only themselves, are taken in one operation; the others are walked."""
        ops, args = self._program.ops, self._program.args
        waiting = kernel & self._chars
        stack = _bits((kernel & ~self._chars) | 1)  # 1: the start, for a search from here
        seen = bytearray(len(ops))
        push, pop = stack.append, stack.pop
        visits = waiting.bit_count()
        while stack:
            pc = pop()
            if seen[pc]:
                continue
            seen[pc] = 1
            visits += 1
            op = ops[pc]
            if op == CHAR:
                waiting |= 1 << pc
            elif op == FORK:
                stack.extend(args[pc])
            elif op == JUMP:
                push(args[pc])
            elif op == ASSERT:
                if Assertion.holds(args[pc], before, after):
                    push(pc + 1)
            elif op == MATCH:
                self.work += visits
                return None
        self.work += visits
        return waiting

    def _intern(self, kernel: int, before: int) -> _State:
        key = (kernel, before)
        state = self._states.get(key)
        if state is None:
            self._spend(1 + (kernel.bit_length() >> 6))  # a 64-bit word of kernel: one entry
            state = self._states[key] = _State(kernel, before)
        return state

    def _remember(self, table: dict, ch: str, value: object) -> None:
        self._spend(1)
        table[ch] = value

    def _spend(self, entries: int) -> None:
        """Count cache entries; drop the whole cache when over budget (states then rebuild)."""
        if self._used + entries > self._budget:
            self.resets += 1
            self._reset()
        self._used += entries


def _bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out
