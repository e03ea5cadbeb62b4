import ast
import unittest

import loader


def top_level_names(src):
    names = []
    for node in ast.parse(src).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.append(n.id)
    return names


class PartsTest(unittest.TestCase):
    def test_order_lists_process_first_and_main_last(self):
        parts = loader.order()
        self.assertEqual(parts[0], "process.py")
        self.assertEqual(parts[-1], "main.py")
        self.assertEqual(len(parts), len(set(parts)))

    def test_no_part_rebinds_another_parts_name(self):
        # The parts share one namespace: a name bound at the top level of
        # two parts would silently replace the first part's.
        seen = {}
        for name in loader.order():
            for n in top_level_names(loader.source(name)):
                if n in seen and seen[n] != name:
                    self.fail("%s is bound by %s and by %s" % (n, seen[n], name))
                seen[n] = name

    def test_left_out_of_process_is_only_process_1s_setup(self):
        tree = ast.parse(loader.source("process.py"))
        left = [n for n in tree.body if loader.left_out(n)]
        calls = sorted(ast.unparse(n.value.func) for n in left if isinstance(n, ast.Expr))
        self.assertEqual(calls, ["os.dup2", "os.dup2", "os.dup2", "signal.signal"])
        ifs = [ast.unparse(n.test) for n in left if isinstance(n, ast.If)]
        self.assertEqual(ifs, ["_libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0"])
        bound = sorted(t.id for n in left if isinstance(n, ast.Assign) for t in n.targets)
        self.assertEqual(bound, sorted(loader.STAND_INS))

    def test_every_binding_is_in_the_namespace(self):
        ns = loader.load()
        for name in loader.order():
            if name == "main.py":
                continue
            for n in top_level_names(loader.source(name)):
                self.assertIn(n, ns, "%s of %s" % (n, name))

    def test_joined_parts_compile_as_one_program(self):
        src = "".join(loader.source(n) + "\n\n" for n in loader.order())
        code = compile(src, "<pdm-runner>", "exec", dont_inherit=True)
        self.assertEqual(code.co_filename, "<pdm-runner>")


if __name__ == "__main__":
    unittest.main()
