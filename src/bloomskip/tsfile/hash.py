"""TsFile's Bloom-filter hash (Murmur128Hash) and its two tail variants.

Java TsFile (and the spec) sign-extend each byte of the incomplete final block; the C++ library
shipped in PyPI ``tsfile`` 2.5 zero-extends them like standard MurmurHash3. The two agree unless a
byte >= 0x80 falls in the tail. Nothing in a file says which variant wrote it, so the variant is
an explicit parameter everywhere. The arithmetic lives in the C kernel ``bloomskip.hashing``.

Example:
    >>> hash32("root.sg.d.s1", 5)
    -1267668613
    >>> hash32("root.设备.s1", 5), hash32("root.设备.s1", 5, signed_tail=False)
    (1697017247, 1978455175)
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from bloomskip import hashing

#: The hash seeds in order; a filter with k hash functions uses the first k.
SEEDS: tuple[int, ...] = (5, 7, 11, 19, 31, 37, 43, 59)
MAX_HASH_FUNCTIONS = len(SEEDS)

#: ``signed-tail``: Java / the spec. ``unsigned-tail``: the C++ library (PyPI ``tsfile``).
#: ``both``: write the bits of both, and answer "maybe" when either variant's bits are set.
HashVariant = Literal["signed-tail", "unsigned-tail", "both"]
HASH_VARIANTS: tuple[HashVariant, ...] = ("signed-tail", "unsigned-tail", "both")

_SIGNED_TAIL_FLAGS: dict[str, tuple[bool, ...]] = {
    "signed-tail": (True,),
    "unsigned-tail": (False,),
    "both": (True, False),
}


def signed_tail_flags(variant: HashVariant) -> tuple[bool, ...]:
    """Return the ``signed_tail`` values a variant stands for.

    Args:
        variant: ``signed-tail``, ``unsigned-tail`` or ``both``.

    Returns:
        ``(True,)``, ``(False,)`` or ``(True, False)``.

    Raises:
        ValueError: Unknown variant.

    Example:
        >>> signed_tail_flags("both")
        (True, False)
    """
    try:
        return _SIGNED_TAIL_FLAGS[variant]
    except KeyError:
        raise ValueError(
            f"unknown hash variant {variant!r}; expected one of {', '.join(HASH_VARIANTS)}"
        ) from None


def hash32(data: bytes, seed: int, signed_tail: bool = True) -> int:
    """Return TsFile's signed 32-bit Murmur128Hash of one byte string.

    Args:
        data: The filter input (``bytes``-like, or ``str`` hashed as UTF-8).
        seed: The seed (TsFile uses :data:`SEEDS`); a signed or unsigned 32-bit value.
        signed_tail: True for the spec / Java tail (sign-extended bytes, XOR-combined), False for
            the C++ library's standard MurmurHash3 tail.

    Returns:
        ``(int)(h1 + h2)``: the low 32 bits of the finalized sum, as a signed integer.

    Example:
        >>> hash32(b"root.sg.d.s1", 5)
        -1267668613
    """
    return int(hashing.tsfile_hash32(data, seed, signed_tail))


def hash32_batch(items: Any, seed: int, signed_tail: bool = True) -> np.ndarray:
    """Return :func:`hash32` of every item of a batch.

    Args:
        items: A list/tuple of ``bytes``/``str``, a pyarrow string/binary array, or a numpy
            array (see the kernel contract in docs/architecture.md).
        seed: The seed.
        signed_tail: As for :func:`hash32`.

    Returns:
        An ``int32`` array, one hash per item.

    Example:
        >>> hash32_batch(["root.sg.d.s1", "root.设备.s1"], 5).tolist()
        [-1267668613, 1697017247]
    """
    return np.asarray(hashing.tsfile_hash32(_as_batch(items), seed, signed_tail), dtype=np.int32)


def variants_differ(items: Any) -> np.ndarray:
    """Tell, per item, whether the two tail variants hash it differently.

    The tail words differ independently of the seed, so one seed decides it for all.

    Args:
        items: A batch, as for :func:`hash32_batch`.

    Returns:
        A ``bool`` array, True where the signed-tail and unsigned-tail hashes differ.

    Example:
        >>> variants_differ(["root.sg.d.s1", "root.设备.s1"]).tolist()
        [False, True]
    """
    batch = _as_batch(items)
    return hash32_batch(batch, SEEDS[0], True) != hash32_batch(batch, SEEDS[0], False)


def _as_batch(items: Any) -> Any:
    # The kernel reads lists, tuples, numpy arrays and Arrow (chunked) arrays; any other
    # iterable becomes a list. Arrow is recognised by duck typing to keep pyarrow unimported.
    if isinstance(items, (list, tuple, np.ndarray)) or hasattr(items, "type"):
        return items
    return list(items)
