from typing import List, Tuple

version: str

def run(args: List[str]) -> Tuple[int, bytes, bytes]: ...
