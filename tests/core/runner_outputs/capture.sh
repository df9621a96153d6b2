#!/usr/bin/env bash
# Recreates tiny failing projects and captures the real output of test runners,
# compilers and linters into the *.fail.txt / *.pass.txt fixtures beside this script.
#
# Assumes the tools are installed:
#   apt-get install -y golang-go ruby-rspec clang junit4 libsurefire-java \
#       maven maven-debian-helper libmaven-compiler-plugin-java \
#       libmaven-resources-plugin-java gradle
#   pip: pytest ruff mypy (this script installs them into $BASE/venv unless
#       VENV=... names a venv that has them)
#   npm (installed per project by this script): jest, vitest, mocha, typescript,
#       eslint @eslint/js globals
#   plus python3, gcc, cargo/rustc, node/npm, java/javac, mvn on PATH.
#
# Usage: capture.sh [TOOL...]   (default: all)
# Projects are built under $BASE (default: a fresh temp dir); every occurrence of
# a project's directory in the output is replaced by /work/proj.
set -u

OUT=$(cd "$(dirname "$0")" && pwd)
BASE=${BASE:-$(mktemp -d /tmp/relay-capture.XXXXXX)}
VENV=${VENV:-$BASE/venv}
PROJ=/work/proj

export NO_COLOR=1 CI=1 FORCE_COLOR=0 TERM=dumb
export CARGO_TERM_COLOR=never CARGO_NET_OFFLINE=true
unset RUST_BACKTRACE
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local GOCACHE="$BASE/.gocache"
export npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false

# capture NAME KIND DIR CMD...: run CMD in DIR, stdout+stderr to NAME.KIND.txt
capture() {
    local name=$1 kind=$2 dir=$3
    shift 3
    local file="$OUT/$name.$kind.txt"
    (cd "$dir" && "$@") >"$file.raw" 2>&1
    local rc=$?
    # Replace the project dir (longest first), then the base dir, with /work/proj.
    sed -e "s#$dir#$PROJ#g" -e "s#$BASE#$PROJ#g" "$file.raw" >"$file"
    rm -f "$file.raw"
    echo "$name.$kind.txt: exit $rc, $(wc -c <"$file") bytes"
}

# fresh NAME: an empty project dir under $BASE
fresh() {
    rm -rf "${BASE:?}/$1"
    mkdir -p "$BASE/$1"
    echo "$BASE/$1"
}

ensure_venv() {
    if [ ! -x "$VENV/bin/pytest" ]; then
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q pytest ruff mypy
    fi
}

# ---------------------------------------------------------------- Python
write_py_money() { # $1 dir, $2 buggy|fixed
    if [ "$2" = buggy ]; then
        cat >"$1/money.py" <<'PY'
"""Small money helpers."""


def total(prices: list[float]) -> int:
    """Sum the prices and round to whole units, halves going up."""
    return round(sum(prices))


def discount(amount: int, percent: int) -> int:
    return max(amount - amount * percent // 100, 0)


def split(amount: int, parts: int) -> list[int]:
    base, rest = divmod(amount, parts)
    return [base] * (parts - rest) + [base + 1] * rest


def format_cents(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"
PY
    else
        cat >"$1/money.py" <<'PY'
"""Small money helpers."""

import math


def total(prices: list[float]) -> int:
    """Sum the prices and round to whole units, halves going up."""
    return math.floor(sum(prices) + 0.5)


def discount(amount: int, percent: int) -> int:
    return max(amount - amount * percent // 100, 0)


def split(amount: int, parts: int) -> list[int]:
    base, rest = divmod(amount, parts)
    return [base + 1] * rest + [base] * (parts - rest)


def format_cents(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"
PY
    fi
}

pytest_proj() {
    local d
    d=$(fresh pytest)
    write_py_money "$d" buggy
    cat >"$d/test_money.py" <<'PY'
from money import discount, format_cents, split, total


def test_total_empty_is_zero():
    assert total([]) == 0


def test_total_single_item():
    assert total([4.0]) == 4


def test_total_rounds_half_up():
    got = total([1.25, 1.25])
    assert got == 3, f"expected 3, got {got}"


def test_total_rounds_down_below_half():
    assert total([1.2, 1.2]) == 2


def test_discount_ten_percent():
    assert discount(200, 10) == 180


def test_discount_never_negative():
    assert discount(50, 150) == 0


def test_split_remainder_goes_first():
    got = split(10, 3)
    assert got == [4, 3, 3], f"expected [4, 3, 3], got {got}"


def test_format_cents():
    assert format_cents(1205) == "12.05"
PY
    capture pytest fail "$d" "$VENV/bin/pytest"
    write_py_money "$d" fixed
    rm -rf "$d/__pycache__" "$d/.pytest_cache"
    capture pytest pass "$d" "$VENV/bin/pytest"
}

unittest_proj() {
    local d
    d=$(fresh unittest)
    write_py_money "$d" buggy
    mkdir -p "$d/tests"
    : >"$d/tests/__init__.py"
    cat >"$d/tests/test_money.py" <<'PY'
import unittest

from money import discount, format_cents, split, total


class TotalTest(unittest.TestCase):
    def test_total_empty_is_zero(self):
        self.assertEqual(total([]), 0)

    def test_total_single_item(self):
        self.assertEqual(total([4.0]), 4)

    def test_total_rounds_half_up(self):
        got = total([1.25, 1.25])
        self.assertEqual(got, 3, f"expected 3, got {got}")

    def test_total_rounds_down_below_half(self):
        self.assertEqual(total([1.2, 1.2]), 2)


class DiscountTest(unittest.TestCase):
    def test_discount_ten_percent(self):
        self.assertEqual(discount(200, 10), 180)

    def test_discount_never_negative(self):
        self.assertEqual(discount(50, 150), 0)


class FormatTest(unittest.TestCase):
    def test_format_cents(self):
        self.assertEqual(format_cents(1205), "12.05")

    def test_split_even(self):
        self.assertEqual(split(9, 3), [3, 3, 3])


if __name__ == "__main__":
    unittest.main()
PY
    capture unittest fail "$d" "$VENV/bin/python" -m unittest
    write_py_money "$d" fixed
    find "$d" -name __pycache__ -prune -exec rm -rf {} +
    capture unittest pass "$d" "$VENV/bin/python" -m unittest
}

ruff_proj() {
    local d
    d=$(fresh ruff)
    write_py_money "$d" fixed
    cat >"$d/report.py" <<'PY'
"""Print a small money report."""

import os
import sys

from money import format_cents, total


def main() -> None:
    cents = total([12.5, 7.25]) * 100
    sys.stdout.write(format_cents(cents) + "\n")


if __name__ == "__main__":
    main()
PY
    capture ruff fail "$d" "$VENV/bin/ruff" check --no-cache .
}

mypy_proj() {
    local d
    d=$(fresh mypy)
    write_py_money "$d" fixed
    cat >"$d/report.py" <<'PY'
"""Print a small money report."""

from money import format_cents, total


def report(prices: list[float]) -> str:
    cents = total(prices) * 100
    return format_cents(cents)


def average(prices: list[float]) -> int:
    if not prices:
        return 0
    return sum(prices) / len(prices)


print(report([12.5, 7.25]), average([1.0, 2.0]))
PY
    capture mypy fail "$d" "$VENV/bin/mypy" --strict --no-incremental money.py report.py
}

# ---------------------------------------------------------------- Go
write_go_money() { # $1 dir, $2 buggy|fixed
    local round="math.RoundToEven(sum)" first="rest"
    if [ "$2" = fixed ]; then round="math.Floor(sum + 0.5)"; fi
    cat >"$1/money/money.go" <<GO
// Package money has small money helpers.
package money

import "math"

// Total sums the prices and rounds to whole units, halves going up.
func Total(prices []float64) int {
	sum := 0.0
	for _, p := range prices {
		sum += p
	}
	return int($round)
}

// Discount takes percent off amount, never going below zero.
func Discount(amount, percent int) int {
	d := amount - amount*percent/100
	if d < 0 {
		return 0
	}
	return d
}

// Split divides amount into parts that differ by at most one.
func Split(amount, parts int) []int {
	out := make([]int, parts)
	for i := range out {
		out[i] = amount / parts
		if i < amount%parts {
			out[i]++
		}
	}
	return out
}
GO
}

gotest_proj() {
    local d
    d=$(fresh gotest)
    mkdir -p "$d/money" "$d/format"
    printf 'module example.com/shop\n\ngo 1.19\n' >"$d/go.mod"
    write_go_money "$d" buggy
    cat >"$d/money/money_test.go" <<'GO'
package money

import (
	"reflect"
	"testing"
)

func TestTotalEmptyIsZero(t *testing.T) {
	if got := Total(nil); got != 0 {
		t.Errorf("expected 0, got %d", got)
	}
}

func TestTotalSingleItem(t *testing.T) {
	if got := Total([]float64{4}); got != 4 {
		t.Errorf("expected 4, got %d", got)
	}
}

func TestTotalRoundsHalfUp(t *testing.T) {
	if got := Total([]float64{1.25, 1.25}); got != 3 {
		t.Errorf("expected 3, got %d", got)
	}
}

func TestTotalRoundsDownBelowHalf(t *testing.T) {
	if got := Total([]float64{1.2, 1.2}); got != 2 {
		t.Errorf("expected 2, got %d", got)
	}
}

func TestDiscountTenPercent(t *testing.T) {
	if got := Discount(200, 10); got != 180 {
		t.Errorf("expected 180, got %d", got)
	}
}

func TestDiscountNeverNegative(t *testing.T) {
	if got := Discount(50, 150); got != 0 {
		t.Errorf("expected 0, got %d", got)
	}
}

func TestSplitRemainderGoesFirst(t *testing.T) {
	want := []int{4, 3, 3}
	if got := Split(10, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("expected %v, got %v", want, got)
	}
}
GO
    cat >"$d/format/format.go" <<'GO'
// Package format renders amounts for people.
package format

import "fmt"

// Cents renders a number of cents as units.cents.
func Cents(c int) string {
	return fmt.Sprintf("%d.%02d", c/100, c%100)
}
GO
    cat >"$d/format/format_test.go" <<'GO'
package format

import "testing"

func TestCents(t *testing.T) {
	if got := Cents(1205); got != "12.05" {
		t.Errorf("expected 12.05, got %s", got)
	}
}

func TestCentsZero(t *testing.T) {
	if got := Cents(0); got != "0.00" {
		t.Errorf("expected 0.00, got %s", got)
	}
}
GO
    capture gotest fail "$d" go test ./...
    write_go_money "$d" fixed
    capture gotest pass "$d" go test ./...
}

# ---------------------------------------------------------------- Rust
write_rust_lib() { # $1 dir, $2 buggy|fixed
    local round="sum.round_ties_even()"
    if [ "$2" = fixed ]; then round="(sum + 0.5).floor()"; fi
    cat >"$1/src/lib.rs" <<RS
//! Small money helpers.

/// Sums the prices and rounds to whole units, halves going up.
pub fn total(prices: &[f64]) -> i64 {
    let sum: f64 = prices.iter().sum();
    $round as i64
}

/// Takes percent off amount, never going below zero.
pub fn discount(amount: i64, percent: i64) -> i64 {
    (amount - amount * percent / 100).max(0)
}

/// Divides amount into parts that differ by at most one.
pub fn split(amount: i64, parts: i64) -> Vec<i64> {
    (0..parts)
        .map(|i| amount / parts + i64::from(i < amount % parts))
        .collect()
}

/// Renders cents as units.cents.
pub fn format_cents(cents: i64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_empty_is_zero() {
        assert_eq!(total(&[]), 0);
    }

    #[test]
    fn total_single_item() {
        assert_eq!(total(&[4.0]), 4);
    }

    #[test]
    fn total_rounds_half_up() {
        let got = total(&[1.25, 1.25]);
        assert_eq!(got, 3, "expected 3, got {got}");
    }

    #[test]
    fn total_rounds_down_below_half() {
        assert_eq!(total(&[1.2, 1.2]), 2);
    }

    #[test]
    fn discount_ten_percent() {
        assert_eq!(discount(200, 10), 180);
    }

    #[test]
    fn discount_never_negative() {
        assert_eq!(discount(50, 150), 0);
    }

    #[test]
    fn split_remainder_goes_first() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
    }

    #[test]
    fn format_cents_pads() {
        assert_eq!(format_cents(1205), "12.05");
    }
}
RS
}

cargo_proj() {
    local d
    d=$(fresh cargo)
    mkdir -p "$d/src"
    printf '[package]\nname = "money"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n' >"$d/Cargo.toml"
    write_rust_lib "$d" buggy
    export CARGO_TARGET_DIR="$d/target"
    capture cargo fail "$d" cargo test
    write_rust_lib "$d" fixed
    capture cargo pass "$d" cargo test
    unset CARGO_TARGET_DIR
}

# ---------------------------------------------------------------- JavaScript
# node_proj NAME PACKAGE_JSON DEV_DEPS...: project dir with its npm packages
node_proj() {
    local name=$1 pkg=$2 d="$BASE/$1"
    shift 2
    mkdir -p "$d"
    find "$d" -mindepth 1 -maxdepth 1 ! -name node_modules ! -name package-lock.json -exec rm -rf {} +
    printf '%s\n' "$pkg" >"$d/package.json"
    (cd "$d" && npm install -D --no-audit --no-fund "$@" >/dev/null 2>&1)
    printf '%s\n' "$pkg" >"$d/package.json" # keep the script lines as written
    echo "$d"
}

write_js_money() { # $1 file, $2 buggy|fixed, $3 cjs|esm
    local round="Math.trunc(sum)" first="base + (i >= parts - rest ? 1 : 0)"
    if [ "$2" = fixed ]; then round="Math.round(sum)"; first="base + (i < rest ? 1 : 0)"; fi
    local exp="module.exports = { total, discount, split, formatCents };"
    if [ "$3" = esm ]; then exp="export { total, discount, split, formatCents };"; fi
    cat >"$1" <<JS
// Small money helpers.

/** Sums the prices and rounds to whole units, halves going up. */
function total(prices) {
  const sum = prices.reduce((acc, p) => acc + p, 0);
  return $round;
}

function discount(amount, percent) {
  return Math.max(amount - Math.floor((amount * percent) / 100), 0);
}

function split(amount, parts) {
  const base = Math.floor(amount / parts);
  const rest = amount % parts;
  return Array.from({ length: parts }, (_, i) => $first);
}

function formatCents(cents) {
  return \`\${Math.floor(cents / 100)}.\${String(cents % 100).padStart(2, "0")}\`;
}

$exp
JS
}

jest_proj() {
    local d
    d=$(node_proj jest '{"name":"money","version":"1.0.0","private":true,"scripts":{"test":"jest"}}' jest)
    mkdir -p "$d/src" "$d/test"
    write_js_money "$d/src/money.js" buggy cjs
    cat >"$d/test/money.test.js" <<'JS'
const { total, discount, split } = require("../src/money");

describe("total", () => {
  test("empty is zero", () => {
    expect(total([])).toBe(0);
  });

  test("single item", () => {
    expect(total([4])).toBe(4);
  });

  test("rounds half up", () => {
    expect(total([1.25, 1.25])).toBe(3);
  });

  test("rounds down below half", () => {
    expect(total([1.2, 1.2])).toBe(2);
  });
});

describe("discount", () => {
  test("ten percent", () => {
    expect(discount(200, 10)).toBe(180);
  });

  test("never negative", () => {
    expect(discount(50, 150)).toBe(0);
  });
});

test("split remainder goes first", () => {
  expect(split(10, 3)).toEqual([4, 3, 3]);
});
JS
    cat >"$d/test/format.test.js" <<'JS'
const { formatCents } = require("../src/money");

test("formatCents pads", () => {
  expect(formatCents(1205)).toBe("12.05");
});

test("formatCents zero", () => {
  expect(formatCents(0)).toBe("0.00");
});
JS
    capture jest fail "$d" npx jest
    write_js_money "$d/src/money.js" fixed cjs
    capture jest pass "$d" npx jest
}

vitest_proj() {
    local d
    d=$(node_proj vitest '{"name":"money","version":"1.0.0","private":true,"type":"module","scripts":{"test":"vitest run"}}' vitest)
    mkdir -p "$d/src" "$d/test"
    write_js_money "$d/src/money.js" buggy esm
    cat >"$d/test/money.test.js" <<'JS'
import { describe, expect, test } from "vitest";
import { total, discount, split } from "../src/money.js";

describe("total", () => {
  test("empty is zero", () => {
    expect(total([])).toBe(0);
  });

  test("single item", () => {
    expect(total([4])).toBe(4);
  });

  test("rounds half up", () => {
    const got = total([1.25, 1.25]);
    expect(got, `expected 3, got ${got}`).toBe(3);
  });

  test("rounds down below half", () => {
    expect(total([1.2, 1.2])).toBe(2);
  });
});

describe("discount", () => {
  test("ten percent", () => {
    expect(discount(200, 10)).toBe(180);
  });

  test("never negative", () => {
    expect(discount(50, 150)).toBe(0);
  });
});

test("split remainder goes first", () => {
  expect(split(10, 3)).toEqual([4, 3, 3]);
});
JS
    cat >"$d/test/format.test.js" <<'JS'
import { expect, test } from "vitest";
import { formatCents } from "../src/money.js";

test("formatCents pads", () => {
  expect(formatCents(1205)).toBe("12.05");
});

test("formatCents zero", () => {
  expect(formatCents(0)).toBe("0.00");
});
JS
    capture vitest fail "$d" npx vitest run
    write_js_money "$d/src/money.js" fixed esm
    capture vitest pass "$d" npx vitest run
}

mocha_proj() {
    local d
    d=$(node_proj mocha '{"name":"money","version":"1.0.0","private":true,"scripts":{"test":"mocha"}}' mocha)
    mkdir -p "$d/src" "$d/test"
    write_js_money "$d/src/money.js" buggy cjs
    cat >"$d/test/money.test.js" <<'JS'
const assert = require("node:assert");
const { total, discount, split, formatCents } = require("../src/money");

describe("total", () => {
  it("is zero when empty", () => {
    assert.strictEqual(total([]), 0);
  });

  it("keeps a single item", () => {
    assert.strictEqual(total([4]), 4);
  });

  it("rounds half up", () => {
    const got = total([1.25, 1.25]);
    assert.strictEqual(got, 3, `expected 3, got ${got}`);
  });

  it("rounds down below half", () => {
    assert.strictEqual(total([1.2, 1.2]), 2);
  });
});

describe("discount", () => {
  it("takes ten percent off", () => {
    assert.strictEqual(discount(200, 10), 180);
  });

  it("never goes negative", () => {
    assert.strictEqual(discount(50, 150), 0);
  });
});

describe("split", () => {
  it("gives the remainder to the first parts", () => {
    assert.deepStrictEqual(split(10, 3), [4, 3, 3]);
  });
});

describe("formatCents", () => {
  it("pads cents to two digits", () => {
    assert.strictEqual(formatCents(1205), "12.05");
  });
});
JS
    capture mocha fail "$d" npx mocha --no-color
    write_js_money "$d/src/money.js" fixed cjs
    capture mocha pass "$d" npx mocha --no-color
}

# ---------------------------------------------------------------- Ruby
write_rb_money() { # $1 dir, $2 buggy|fixed
    local round="sum.round(half: :even)"
    if [ "$2" = fixed ]; then round="sum.round(half: :up)"; fi
    cat >"$1/lib/money.rb" <<RB
# Small money helpers.
module Money
  module_function

  # Sums the prices and rounds to whole units, halves going up.
  def total(prices)
    sum = prices.sum(0.0)
    $round
  end

  def discount(amount, percent)
    [amount - (amount * percent / 100), 0].max
  end

  def split(amount, parts)
    base, rest = amount.divmod(parts)
    Array.new(parts) { |i| i < rest ? base + 1 : base }
  end

  def format_cents(cents)
    format("%d.%02d", cents / 100, cents % 100)
  end
end
RB
}

rspec_proj() {
    local d
    d=$(fresh rspec)
    mkdir -p "$d/lib" "$d/spec"
    write_rb_money "$d" buggy
    printf -- '--require spec_helper\n' >"$d/.rspec"
    printf '$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))\n' >"$d/spec/spec_helper.rb"
    cat >"$d/spec/money_spec.rb" <<'RB'
require "money"

RSpec.describe Money do
  describe ".total" do
    it "is zero when empty" do
      expect(Money.total([])).to eq(0)
    end

    it "keeps a single item" do
      expect(Money.total([4.0])).to eq(4)
    end

    it "rounds half up" do
      expect(Money.total([1.25, 1.25])).to eq(3)
    end

    it "rounds down below half" do
      expect(Money.total([1.2, 1.2])).to eq(2)
    end
  end

  describe ".discount" do
    it "takes ten percent off" do
      expect(Money.discount(200, 10)).to eq(180)
    end

    it "never goes negative" do
      expect(Money.discount(50, 150)).to eq(0)
    end
  end

  describe ".split" do
    it "gives the remainder to the first parts" do
      expect(Money.split(10, 3)).to eq([4, 3, 3])
    end
  end

  describe ".format_cents" do
    it "pads cents to two digits" do
      expect(Money.format_cents(1205)).to eq("12.05")
    end
  end
end
RB
    capture rspec fail "$d" rspec --no-color
    write_rb_money "$d" fixed
    capture rspec pass "$d" rspec --no-color
}

# ---------------------------------------------------------------- Java
write_java_sources() { # $1 dir, $2 buggy|fixed
    local round="Math.rint(sum)"
    if [ "$2" = fixed ]; then round="Math.floor(sum + 0.5)"; fi
    mkdir -p "$1/src/main/java/shop" "$1/src/test/java/shop"
    cat >"$1/src/main/java/shop/Money.java" <<JAVA
package shop;

/** Small money helpers. */
public final class Money {
    private Money() {}

    /** Sums the prices and rounds to whole units, halves going up. */
    public static long total(double... prices) {
        double sum = 0;
        for (double p : prices) {
            sum += p;
        }
        return (long) $round;
    }

    public static long discount(long amount, long percent) {
        return Math.max(amount - amount * percent / 100, 0);
    }

    public static long[] split(long amount, int parts) {
        long[] out = new long[parts];
        for (int i = 0; i < parts; i++) {
            out[i] = amount / parts + (i < amount % parts ? 1 : 0);
        }
        return out;
    }

    public static String formatCents(long cents) {
        return String.format("%d.%02d", cents / 100, cents % 100);
    }
}
JAVA
    cat >"$1/src/test/java/shop/MoneyTest.java" <<'JAVA'
package shop;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class MoneyTest {
    @Test
    public void totalEmptyIsZero() {
        assertEquals(0, Money.total());
    }

    @Test
    public void totalSingleItem() {
        assertEquals(4, Money.total(4.0));
    }

    @Test
    public void totalRoundsHalfUp() {
        long got = Money.total(1.25, 1.25);
        assertEquals("expected 3, got " + got, 3, got);
    }

    @Test
    public void totalRoundsDownBelowHalf() {
        assertEquals(2, Money.total(1.2, 1.2));
    }

    @Test
    public void discountTenPercent() {
        assertEquals(180, Money.discount(200, 10));
    }

    @Test
    public void discountNeverNegative() {
        assertEquals(0, Money.discount(50, 150));
    }

    @Test
    public void splitRemainderGoesFirst() {
        assertArrayEquals(new long[] {4, 3, 3}, Money.split(10, 3));
    }
}
JAVA
    cat >"$1/src/test/java/shop/FormatTest.java" <<'JAVA'
package shop;

import static org.junit.Assert.assertEquals;

import org.junit.Test;

public class FormatTest {
    @Test
    public void formatCentsPads() {
        assertEquals("12.05", Money.formatCents(1205));
    }

    @Test
    public void formatCentsZero() {
        assertEquals("0.00", Money.formatCents(0));
    }
}
JAVA
}

# Maven offline against Debian's /usr/share/maven-repo (plugins and junit 4 from Debian).
maven_proj() {
    local d
    d=$(fresh maven)
    write_java_sources "$d" buggy
    cat >"$d/pom.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shop</groupId>
  <artifactId>money</artifactId>
  <version>1.0.0</version>
  <packaging>jar</packaging>

  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>17</maven.compiler.release>
  </properties>

  <dependencies>
    <dependency>
      <groupId>junit</groupId>
      <artifactId>junit</artifactId>
      <version>4.13.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>

  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-resources-plugin</artifactId>
        <version>RESVER</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.10.1</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-surefire-plugin</artifactId>
        <version>2.22.3</version>
      </plugin>
    </plugins>
  </build>
</project>
XML
    local resver
    resver=$(ls /usr/share/maven-repo/org/apache/maven/plugins/maven-resources-plugin | grep -v debian | sort -V | tail -n 1)
    sed -i "s/RESVER/$resver/" "$d/pom.xml"
    capture maven fail "$d" mvn -B -o -Dmaven.repo.local=/usr/share/maven-repo test
    write_java_sources "$d" fixed
    capture maven pass "$d" mvn -B -o -Dmaven.repo.local=/usr/share/maven-repo test
    # Debian's Maven 3.8.7 writes two ESC[0m resets at the start and end even in
    # batch mode (no option turns them off); drop them so the fixture is plain text.
    sed -i 's/\x1b\[0m//g' "$OUT/maven.fail.txt" "$OUT/maven.pass.txt"
}

# Gradle (Debian's gradle 4.4.1) offline: junit 4 jars from Debian's /usr/share/java as a flatDir repository.
gradle_proj() {
    local d
    d=$(fresh gradle)
    write_java_sources "$d" buggy
    echo "rootProject.name = 'money'" >"$d/settings.gradle"
    cat >"$d/build.gradle" <<'GRADLE'
apply plugin: 'java'

repositories {
    flatDir { dirs '/usr/share/java' }
}

dependencies {
    testCompile name: 'junit4'
    testCompile name: 'hamcrest-core'
}
GRADLE
    export GRADLE_USER_HOME="$BASE/.gradle-home"
    capture gradle fail "$d" gradle --offline --console=plain test
    write_java_sources "$d" fixed
    capture gradle pass "$d" gradle --offline --console=plain test
    gradle --stop >/dev/null 2>&1
    unset GRADLE_USER_HOME
}

# ---------------------------------------------------------------- compilers and linters
tsc_proj() {
    local d
    d=$(node_proj tsc '{"name":"money","version":"1.0.0","private":true,"scripts":{"build":"tsc"}}' typescript)
    mkdir -p "$d/src"
    cat >"$d/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022",
    "module": "commonjs",
    "strict": true,
    "outDir": "dist"
  },
  "include": ["src"]
}
JSON
    cat >"$d/src/money.ts" <<'TS'
// Small money helpers.

export function total(prices: number[]): number {
  const sum = prices.reduce((acc, p) => acc + p, 0);
  return Math.floor(sum + 0.5);
}

export function formatCents(cents: number): string {
  return `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;
}
TS
    cat >"$d/src/report.ts" <<'TS'
import { formatCents, total } from "./money";

export function report(prices: number[]): string {
  const cents: number = formatCents(total(prices) * 100);
  return `total: ${cents}`;
}

export function average(prices: number[]): number {
  return total(prices.length) / prices.length;
}
TS
    capture tsc fail "$d" npx tsc --noEmit
}

write_c_sources() { # $1 dir
    mkdir -p "$1/src"
    cat >"$1/src/money.h" <<'C'
#ifndef MONEY_H
#define MONEY_H

long total(const double *prices, int count);
long discount(long amount, long percent);

#endif
C
    cat >"$1/src/money.c" <<'C'
#include <math.h>

#include "money.h"

/* Sums the prices and rounds to whole units, halves going up. */
long total(const double *prices, int count)
{
    double sum = 0.0;
    for (int i = 0; i < count; i++) {
        sum += prices[i];
    }
    return (long)floor(sum + 0.5);
}

long discount(long amount, long percent)
{
    long left = amount - amount * percent / 100;
    return left < 0 ? 0 : lefft;
}
C
    cat >"$1/src/main.c" <<'C'
#include <stdio.h>

#include "money.h"

int main(void)
{
    const double prices[] = {1.25, 1.25};
    printf("%ld\n", total(prices, 2));
    printf("%ld\n", discount(200, 10));
    return 0;
}
C
}

gcc_proj() {
    local d
    d=$(fresh gcc)
    write_c_sources "$d"
    capture gcc fail "$d" gcc -Wall -Wextra -fdiagnostics-color=never -o money src/money.c src/main.c -lm
}

clang_proj() {
    local d
    d=$(fresh clang)
    write_c_sources "$d"
    capture clang fail "$d" clang -Wall -Wextra -fno-color-diagnostics -o money src/money.c src/main.c -lm
}

eslint_proj() {
    local d
    d=$(node_proj eslint '{"name":"money","version":"1.0.0","private":true,"type":"module","scripts":{"lint":"eslint ."}}' eslint @eslint/js globals)
    mkdir -p "$d/src"
    cat >"$d/eslint.config.js" <<'JS'
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    languageOptions: {
      globals: globals.node,
    },
  },
];
JS
    cat >"$d/src/money.js" <<'JS'
// Small money helpers.

/** Sums the prices and rounds to whole units, halves going up. */
export function total(prices) {
  const sum = prices.reduce((acc, p) => acc + p, 0);
  return Math.round(sum);
}

export function discount(amount, percent) {
  const rate = percent / 100;
  return Math.max(amount - Math.floor((amount * percent) / 100), 0);
}

export function formatCents(cents) {
  return `${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;
}
JS
    cat >"$d/src/report.js" <<'JS'
import { formatCents, total } from "./money.js";

export function report(prices) {
  return `total: ${formatCents(total(prices) * 100)}`;
}
JS
    capture eslint fail "$d" npx eslint .
}

# ---------------------------------------------------------------- main
ALL="pytest unittest gotest cargo jest vitest mocha rspec maven gradle tsc gcc clang eslint ruff mypy"
[ $# -gt 0 ] && ALL="$*"
mkdir -p "$BASE"
for tool in $ALL; do
    case $tool in
        pytest | unittest | ruff | mypy) ensure_venv ;;
    esac
    "${tool}_proj"
done
