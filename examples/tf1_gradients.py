"""The classic TF1 tutorial programs' ``tf.gradients`` calls, ported line by line to funcgrad.

Each line prints the gradients TensorFlow 1.x prints for the same program.

    python examples/tf1_gradients.py
"""

import argparse

import jax.numpy as jnp
import reporting

import funcgrad as fg


def build_parser() -> argparse.ArgumentParser:
    """The command line: no options."""
    return reporting.make_parser(__doc__)


def main(argv: list[str] | None = None) -> None:
    """Prints each call's gradients."""
    build_parser().parse_args(argv)
    a, b = jnp.float32(2.0), jnp.float32(3.0)
    show = lambda grads: [None if g is None else g.tolist() for g in grads]  # noqa: E731
    print("5*a + b              ->", show(fg.gradients(lambda a, b: 5 * a + b, [a, b])))
    print("ys = [a, b]          ->", show(fg.gradients(lambda a, b: [a, b], [a, b])))
    print(
        "ys = [a+b, 2a+3b]    ->",
        show(fg.gradients(lambda a, b: [a + b, 2 * a + 3 * b], [a, b])),
    )
    w = [jnp.zeros(3, jnp.float32) for _ in range(4)]
    grad_ys = [jnp.array([2.0, 2.0, 3.0]), jnp.array([3.0, 2.0, 4.0])]
    print(
        "grad_ys              ->",
        show(fg.gradients(lambda w1, w2, w3, w4: [w1 + w2 + w3, w3 + w4], w, grad_ys)),
    )
    c_and_d = lambda a, b: (a + b, 2 * a + b)  # noqa: E731
    print("c + d                ->", show(fg.gradients(lambda a, b: sum(c_and_d(a, b)), [a, b])))
    print(
        "stop_gradient(c) + d ->",
        show(fg.gradients(lambda a, b: fg.stop_gradient(a + b) + 2 * a + b, [a, b])),
    )
    print(
        "stop_gradient(3*w1)*w2 ->",
        show(fg.gradients(lambda w1, w2: fg.stop_gradient(3 * w1) * w2, [a, b])),
    )
    print("unused argument      ->", show(fg.gradients(lambda a, b: 3 * a, [a, b])))


if __name__ == "__main__":
    main()
