"""examples/tf1_gradients.py prints TensorFlow's numbers for each tf.gradients call it ports."""

import pytest

from tests import example_scripts


def test_prints_tensorflows_numbers(capsys: pytest.CaptureFixture) -> None:
    example_scripts.load("tf1_gradients").main([])
    lines = dict(line.split("->") for line in capsys.readouterr().out.splitlines())
    got = {k.strip(): v.strip() for k, v in lines.items()}
    assert got["5*a + b"] == "[5.0, 1.0]"
    assert got["ys = [a+b, 2a+3b]"] == "[3.0, 4.0]"
    assert got["grad_ys"] == "[[2.0, 2.0, 3.0], [2.0, 2.0, 3.0], [5.0, 4.0, 7.0], [3.0, 2.0, 4.0]]"
    assert got["c + d"] == "[3.0, 2.0]" and got["stop_gradient(c) + d"] == "[2.0, 1.0]"
    assert got["stop_gradient(3*w1)*w2"] == "[None, 6.0]"
    assert got["unused argument"] == "[3.0, None]"
