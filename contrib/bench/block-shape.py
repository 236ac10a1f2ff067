# The shape of a real block's transactions, read from its raw bytes with no Bitcoin library:
# inputs and outputs per transaction, output script kinds, input kinds (from scriptSig and
# witness). An independent check of what `cairn generate --shape mainnet` reads
# (src/generate/shape.rs, whose unit test holds these counts).
# Usage: python3 contrib/bench/block-shape.py [BLOCK.bin]  (default: the block cairn embeds)
import collections, os, sys
path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), '..', '..', 'src', 'generate', 'mainnet-block-951658.bin')
b = open(path, 'rb').read()
p=80
def vi():
    global p
    n=b[p];p+=1
    if n<0xfd: return n
    if n==0xfd: r=int.from_bytes(b[p:p+2],'little');p+=2;return r
    if n==0xfe: r=int.from_bytes(b[p:p+4],'little');p+=4;return r
    r=int.from_bytes(b[p:p+8],'little');p+=8;return r
ntx=vi()
ins=collections.Counter();outs=collections.Counter();kinds=collections.Counter();inkinds=collections.Counter()
def kind(s):
    if len(s)==22 and s[0]==0 and s[1]==20: return 'p2wpkh'
    if len(s)==34 and s[0]==0 and s[1]==32: return 'p2wsh'
    if len(s)==34 and s[0]==0x51 and s[1]==32: return 'p2tr'
    if len(s)==25 and s[0]==0x76: return 'p2pkh'
    if len(s)==23 and s[0]==0xa9: return 'p2sh'
    if len(s)>0 and s[0]==0x6a: return 'op_return'
    return 'other:%s'%s[:2].hex()
for t in range(ntx):
    p+=4
    seg=False
    if b[p]==0 and b[p+1]==1: seg=True;p+=2
    ni=vi(); wit=[]
    for i in range(ni):
        p+=36; l=vi(); ss=b[p:p+l]; p+=l; p+=4; wit.append(ss)
    no=vi()
    for i in range(no):
        p+=8; l=vi(); s=b[p:p+l]; p+=l; 
        if t>0: kinds[kind(s)]+=1
    if seg:
        for i in range(ni):
            n=vi(); items=[]
            for j in range(n): l=vi(); items.append(l); p+=l
            if t>0:
                ss=wit[i]
                if n==2 and items[1]==33 and len(ss)==0: k='p2wpkh'
                elif n==2 and len(ss)==23: k='p2sh-p2wpkh'
                elif n==1 and items[0] in (64,65): k='p2tr-key'
                elif n==0 and len(ss)>0: k='legacy'
                elif len(ss)==0 and n>2: k='p2wsh/tapscript'
                else: k='other'
                inkinds[k]+=1
    else:
        if t>0:
            for ss in wit: inkinds['legacy' if ss else 'other']+=1
    p+=4
    if t>0: ins[ni]+=1; outs[no]+=1
print('ntx',ntx,'end',p,len(b))
print('inputs',sorted(ins.items()))
print('outputs',sorted(outs.items()))
print('out kinds',kinds.most_common())
print('in kinds',inkinds.most_common())
print('avg in',sum(k*v for k,v in ins.items())/(ntx-1),'avg out',sum(k*v for k,v in outs.items())/(ntx-1))
