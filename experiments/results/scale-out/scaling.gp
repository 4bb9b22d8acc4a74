set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/scale-out/scaling.png'
set title "scale-out: speedup over 1 node(s) alone (n=4096)"
set xlabel 'nodes'
set ylabel 'speedup'
set xtics 1
set key inside left top
plot 'experiments/results/scale-out/scaling.dat' using 1:2 with linespoints dt 2 lw 2 title 'ideal (sum of measured speeds)', '' using 1:3 with linespoints lw 2 title 'even, overlap on', '' using 1:4 with linespoints lw 2 title 'proportional, overlap on', '' using 1:5 with linespoints lw 2 title 'model, overlap on'
