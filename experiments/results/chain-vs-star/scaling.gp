set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/chain-vs-star/scaling.png'
set title "chain-vs-star: speedup over 1 node(s) alone (n=4096)"
set xlabel 'nodes'
set ylabel 'speedup'
set xtics 1
set key inside left top
plot 'experiments/results/chain-vs-star/scaling.dat' using 1:2 with linespoints dt 2 lw 2 title 'ideal (sum of measured speeds)', '' using 1:3 with linespoints lw 2 title 'proportional/star, 8 panels in flight', '' using 1:4 with linespoints lw 2 title 'proportional/chain, 8 panels in flight', '' using 1:5 with linespoints lw 2 title 'model, 8 panels in flight'
