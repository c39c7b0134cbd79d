#!/usr/bin/env python3
"""Mutation fuzz of the commands, run by hand (not part of the test suite):

    python3 cli/tests/fuzz_commands.py PISESS_BINARY ROUNDS SEED

Each round damages a copy of a fixture or genuine session file under 400 KB (byte flips,
deletions, inserted quotes, brackets, BOMs, CRs and NULs, duplicated, swapped and glued lines,
odd versions and entry types) and runs every command below on it against a scratch store.
A panic, an exit status other than 0, 1 or 2, or a run over 60 s is printed and its input kept
in the current folder as panic-SEED-N.jsonl / timeout-SEED-N.jsonl. Session 22 ran seeds 1
(3 rounds), 11 (400) and 12 (1,500), session 24 seeds 24 (600) and 25 (2,000, on
e733f93's binary), session 25 seed 26 (400, with grep's -c/-w/-l/-m): no problem; session 26 seed 27 (150) and 28 (200,
with files -l/-c): no problem.
"""
import os, random, subprocess, sys, glob, shutil
B = sys.argv[1]; rounds = int(sys.argv[2]); seed = int(sys.argv[3])
r = random.Random(seed)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
srcs = sorted(glob.glob(f'{root}/fixtures/sessions/*.jsonl') + glob.glob(f'{root}/fixtures/edge/*.jsonl') + glob.glob(f'{root}/../shared/realdata/*.jsonl'))
srcs = [s for s in srcs if os.path.getsize(s) < 400_000]
import tempfile
work = tempfile.mkdtemp(prefix=f'pisess-fuzz{seed}-')
def mutate(b):
    b = bytearray(b)
    for _ in range(r.choice([1, 1, 2, 4, 16])):
        k = r.randrange(9)
        if not b: break
        i = r.randrange(len(b))
        if k == 0: b[i] = r.randrange(256)
        elif k == 1: del b[i:i + r.randrange(1, 200)]
        elif k == 2: b[i:i] = r.choice([b'\n', b'{', b'}', b'"', b'\\', b'\xff', b'\x00', b'null', b'[]', b'"id":"x"', b'"parentId":"x"', b'\r\n', b'\xef\xbb\xbf'])
        elif k == 3:  # duplicate a line
            lines = b.split(b'\n'); j = r.randrange(len(lines)); lines.insert(r.randrange(len(lines)), lines[j]); b = bytearray(b'\n'.join(lines))
        elif k == 4:  # glue two lines
            j = b.find(b'\n', i)
            if j >= 0: del b[j]
        elif k == 5: b = b[:i]
        elif k == 6:  # swap lines
            lines = b.split(b'\n'); a, c = r.randrange(len(lines)), r.randrange(len(lines)); lines[a], lines[c] = lines[c], lines[a]; b = bytearray(b'\n'.join(lines))
        elif k == 7:  # replace a number with a huge or negative one
            j = b.find(b'"version":', i)
            if j >= 0: b[j+10:j+11] = r.choice([b'99', b'-1', b'1e400', b'"3"', b'2.5'])
        elif k == 8:  # change a type value
            j = b.find(b'"type":"', i)
            if j >= 0: b[j+8:j+9] = r.choice([b'Q', b'', b'mess', b'x'])
    return bytes(b)
cmds = [['import', '{f}'], ['log', '{f}'], ['tree', '{f}'], ['--json', 'context', '{f}'], ['show', '{f}', '@leaf'],
        ['check', '{f}'], ['export', '{f}', '--format', 'md', '-o', '{o}'], ['--json', 'compact', '{f}', '--dry-run'],
        ['migrate', '{f}', '--out', '{o}.d'], ['files', 'src/**', '--session', '{f}'], ['--json', 'files', '-c', '**', '--session', '{f}'], ['files', '-l', 'src', '--session', '{f}'], ['prune', '{f}', '--keep-leaf', '--dry-run'], ['--json', 'navigate', '{f}', '@root', '--dry-run'], ['fork', '{f}', '@leaf', '-o', '{o}.fork.jsonl'], ['stats', '{f}'], ['grep', 'e', '--session', '{f}'], ['--json', 'grep', '-c', '-w', '-i', 'E', '--session', '{f}'], ['grep', '-l', '-m', '1', '\\\\', '--session', '{f}'], ['diff', '{f}', '@leaf', '@leaf']]
panics = 0
for n in range(rounds):
    src = r.choice(srcs)
    f = f'{work}/m{n}.jsonl'; o = f'{work}/o{n}'
    open(f, 'wb').write(mutate(open(src, 'rb').read()))
    env = dict(os.environ, PISESS_STORE=f'{work}/store.redb', RUST_BACKTRACE='0')
    for c in cmds:
        args = [a.format(f=f, o=o) for a in c]
        try:
            p = subprocess.run([B] + args, env=env, capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            print('TIMEOUT', src, args); panics += 1; shutil.copy(f, f'timeout-{seed}-{n}.jsonl'); continue
        err = p.stderr.decode('utf8', 'replace')
        if p.returncode not in (0, 1, 2) or 'panicked' in err:
            panics += 1
            keep = f'panic-{seed}-{n}.jsonl'; shutil.copy(f, keep)
            print('PANIC', p.returncode, src, ' '.join(c), keep, err[-400:].replace('\n', ' | '))
    for x in glob.glob(f'{work}/o{n}*'):
        shutil.rmtree(x, ignore_errors=True) if os.path.isdir(x) else os.remove(x)
    os.remove(f)
shutil.rmtree(work, ignore_errors=True)
print("rounds", rounds, "problems", panics)
sys.exit(1 if panics else 0)
